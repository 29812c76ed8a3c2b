// Reading fields of a request body for the translated APIs (Responses, Messages), with the 400
// that names the field on a wrong type. Null means absent, as everywhere in the server.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace clover::server {

inline bool present(const nlohmann::ordered_json& o, const char* key) {
  return o.is_object() && o.contains(key) && !o.at(key).is_null();
}

inline ApiError wrong_type(const std::string& field, const char* want, const nlohmann::ordered_json& got) {
  return bad_request("'" + field + "' must be " + want + " (got " + got.type_name() + ")", field);
}

// o[key] as a string; 400 naming `f`.key when it is missing or not a string.
inline const std::string& get_string(const nlohmann::ordered_json& o, const char* key, const std::string& f) {
  if (!present(o, key) || !o.at(key).is_string()) throw bad_request("'" + f + "." + key + "' must be a string", f + "." + key);
  return o.at(key).get_ref<const std::string&>();
}

}  // namespace clover::server
