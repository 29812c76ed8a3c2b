#include "server/thinking_budget.h"

namespace clover::server {

namespace {
constexpr std::string_view kMarkers[] = {"</think>", "<tool_call>"};
constexpr size_t kLongestMarker = 11;
}  // namespace

bool ThinkingBudget::push(std::string_view text) {
  if (!open_) return false;
  tail_ += text;
  for (std::string_view m : kMarkers)
    if (tail_.find(m) != std::string::npos) {  // the closing token is not a thinking token
      open_ = false;
      return false;
    }
  ++tokens_;
  if (tail_.size() > kLongestMarker) tail_.erase(0, tail_.size() - kLongestMarker);
  return budget_ >= 0 && tokens_ >= budget_;
}

std::string ThinkingBudget::closing_text(const std::string& message) { return message + "\n</think>\n\n"; }

}  // namespace clover::server
