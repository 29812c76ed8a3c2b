// Nesting depth of JSON, measured without recursion, so that code which recurses once per level
// (nlohmann's dump() and copy constructor, the Jinja value conversion) is only given values it
// can walk. Model output and client input can both nest 100,000 deep.
#pragma once
#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace clover::chat {

// The most nesting the chat layer walks (the server refuses deeper requests earlier, at 128).
constexpr size_t kMaxJsonDepth = 256;

// Deepest nesting of arrays and objects in JSON text (brackets inside strings do not count);
// linear, and meaningful for invalid JSON too.
size_t json_text_depth(std::string_view text);

// Deepest nesting of a parsed value (a scalar is 0, [] is 1).
size_t json_depth(const nlohmann::ordered_json& j);

}  // namespace clover::chat
