// Holds back generated text that might be the start of a stop string, so a stop string never
// reaches the client, even when it arrives split across tokens.
#pragma once
#include <string>
#include <vector>

namespace clover::engine {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds text; returns what can be released now. Sets stopped() when a stop string completed
  // (the text before it is released, the stop string and anything after it are dropped).
  std::string push(const std::string& text) {
    if (stopped_) return {};
    buf_ += text;
    size_t cut = std::string::npos;
    for (const auto& s : stops_) {
      if (s.empty()) continue;
      size_t p = buf_.find(s);
      if (p != std::string::npos && p < cut) cut = p;
    }
    if (cut != std::string::npos) {
      stopped_ = true;
      std::string out = buf_.substr(0, cut);
      buf_.clear();
      return out;
    }
    // Keep the longest tail that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const auto& s : stops_)
      for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), buf_.size()); n > keep; --n)
        if (buf_.compare(buf_.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
    std::string out = buf_.substr(0, buf_.size() - keep);
    buf_.erase(0, buf_.size() - keep);
    return out;
  }
  // End of generation without a stop: release what was held back.
  std::string flush() {
    std::string out;
    if (!stopped_) out.swap(buf_);
    return out;
  }
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string buf_;
  bool stopped_ = false;
};

}  // namespace clover::engine
