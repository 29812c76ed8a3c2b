#include "chat/json_depth.h"

#include <utility>
#include <vector>

namespace clover::chat {

size_t json_text_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

size_t json_depth(const nlohmann::ordered_json& j) {
  size_t deepest = 0;
  std::vector<std::pair<const nlohmann::ordered_json*, size_t>> todo{{&j, 0}};
  while (!todo.empty()) {
    auto [v, d] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, d + 1);
    for (const auto& x : *v) todo.emplace_back(&x, d + 1);
  }
  return deepest;
}

}  // namespace clover::chat
