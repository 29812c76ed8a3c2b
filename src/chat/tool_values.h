// Typing tool-call parameter values by the tools' JSON schemas: the XML call format carries every
// value as raw text, and the schema says whether "2" is the integer 2 or the string "2".
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace clover::chat {

class ToolSchemas {
 public:
  ToolSchemas() = default;
  // `tools`: OpenAI tools array ({"type":"function","function":{"name","parameters"}}) or null.
  explicit ToolSchemas(const nlohmann::ordered_json& tools);

  // JSON-schema types allowed for a parameter ("string", "integer", ...); empty when unknown.
  const std::vector<std::string>& types(std::string_view tool, std::string_view param) const;
  // Values of this parameter are JSON strings (unknown parameters included).
  bool is_string(std::string_view tool, std::string_view param) const;

 private:
  std::map<std::string, std::map<std::string, std::vector<std::string>, std::less<>>, std::less<>> types_;
};

// The JSON text for a raw value of a non-string parameter: the first of `types` it parses as, else
// a JSON string of the raw text.
std::string typed_value_json(std::string_view raw, const std::vector<std::string>& types);

// Appends `s` JSON-escaped (no quotes); invalid UTF-8 bytes become U+FFFD.
void json_escape_append(std::string& out, std::string_view s);

}  // namespace clover::chat
