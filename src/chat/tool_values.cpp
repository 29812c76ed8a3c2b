#include "chat/tool_values.h"

#include "chat/json_depth.h"

#include <algorithm>
#include <cstdio>

namespace clover::chat {

using json = nlohmann::ordered_json;

static void collect_types(const json& schema, std::vector<std::string>& out, int depth) {
  if (!schema.is_object() || depth > 8) return;
  auto add = [&](const std::string& t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  if (schema.contains("type")) {
    const json& t = schema["type"];
    if (t.is_string()) add(t.get<std::string>());
    else if (t.is_array())
      for (const auto& x : t)
        if (x.is_string()) add(x.get<std::string>());
  }
  for (const char* k : {"anyOf", "oneOf", "allOf"})
    if (schema.contains(k) && schema[k].is_array())
      for (const auto& s : schema[k]) collect_types(s, out, depth + 1);
  if (out.empty() && schema.contains("enum") && schema["enum"].is_array()) {
    for (const auto& v : schema["enum"]) {
      if (v.is_string()) add("string");
      else if (v.is_boolean()) add("boolean");
      else if (v.is_number_integer()) add("integer");
      else if (v.is_number()) add("number");
      else if (v.is_null()) add("null");
    }
  }
}

ToolSchemas::ToolSchemas(const json& tools) {
  if (!tools.is_array()) return;
  for (const auto& t : tools) {
    const json* f = &t;
    if (t.is_object() && t.contains("function") && t["function"].is_object()) f = &t["function"];
    if (!f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) continue;
    auto& params = types_[(*f)["name"].get<std::string>()];
    if (!f->contains("parameters") || !(*f)["parameters"].is_object()) continue;
    const json& p = (*f)["parameters"];
    if (!p.contains("properties") || !p["properties"].is_object()) continue;
    for (auto it = p["properties"].begin(); it != p["properties"].end(); ++it) {
      std::vector<std::string> ts;
      collect_types(it.value(), ts, 0);
      params[it.key()] = std::move(ts);
    }
  }
}

const std::vector<std::string>& ToolSchemas::types(std::string_view tool, std::string_view param) const {
  static const std::vector<std::string> none;
  auto t = types_.find(tool);
  if (t == types_.end()) return none;
  auto p = t->second.find(param);
  return p == t->second.end() ? none : p->second;
}

bool ToolSchemas::is_string(std::string_view tool, std::string_view param) const {
  const auto& ts = types(tool, param);
  return ts.empty() || std::find(ts.begin(), ts.end(), "string") != ts.end();
}

void json_escape_append(std::string& out, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok) {
      // Reject overlong forms and surrogates, which nlohmann::json (and clients) refuse.
      uint32_t cp = c & (0xff >> (n + 1));
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
      ok = !(n == 2 && cp < 0x80) && !(n == 3 && cp < 0x800) && !(n == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
           !(cp >= 0xd800 && cp < 0xe000);
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
}

static std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string_view() : s.substr(b, e - b + 1);
}

std::string typed_value_json(std::string_view raw, const std::vector<std::string>& types) {
  std::string_view s = trim(raw);
  for (const auto& t : types) {
    if (t == "integer") {
      size_t k = (!s.empty() && s[0] == '-') ? 1 : 0;
      if (s.size() > k && s.size() - k <= 18 && std::all_of(s.begin() + k, s.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::string(s);
    } else if (t == "number") {
      json j = json::parse(s, nullptr, false);
      if (j.is_number() && !s.empty() && s[0] != '+' && s.find_first_of(" \t\r\n") == std::string_view::npos)
        return std::string(s);
    } else if (t == "boolean") {
      if (s == "true" || s == "True") return "true";
      if (s == "false" || s == "False") return "false";
    } else if (t == "null") {
      if (s == "null" || s == "None") return "null";
    } else if ((t == "object" || t == "array") && json_text_depth(s) <= kMaxJsonDepth) {  // deeper: a string
      json j = json::parse(s, nullptr, false);
      if ((t == "object" && j.is_object()) || (t == "array" && j.is_array()))
        return j.dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  std::string out = "\"";
  json_escape_append(out, raw);
  return out + "\"";
}

}  // namespace clover::chat
