// Reading fields of a request body for the translated APIs (Responses, Messages), with the 400
// that names the field on a wrong type. Null means absent, as everywhere in the server.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
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

// body[key] into out when present: a boolean; a finite number in [lo, hi]; an integer in [lo, hi].
// False when absent; a 400 naming the key when of the wrong type or out of range.
inline bool get_bool(const json& body, const char* key, bool& out) {
  if (!present(body, key)) return false;
  const json& v = body.at(key);
  if (!v.is_boolean()) throw wrong_type(key, "a boolean", v);
  out = v.get<bool>();
  return true;
}

inline bool get_number(const json& body, const char* key, float& out, double lo, double hi) {
  if (!present(body, key)) return false;
  const json& v = body.at(key);
  if (!v.is_number()) throw wrong_type(key, "a number", v);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad_request("'" + std::string(key) + "' must be between " + json(lo).dump() + " and " + json(hi).dump() + " (got " + v.dump() + ")",
                      key);
  out = static_cast<float>(x);
  return true;
}

inline bool get_int(const json& body, const char* key, int64_t& out, int64_t lo, int64_t hi) {
  if (!present(body, key)) return false;
  const json& v = body.at(key);
  if (!v.is_number_integer()) throw wrong_type(key, "an integer", v);
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    x = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                         : static_cast<int64_t>(u);
  } else {
    x = v.get<int64_t>();
  }
  if (x < lo || x > hi)
    throw bad_request("'" + std::string(key) + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                          " (got " + v.dump() + ")",
                      key);
  out = x;
  return true;
}

}  // namespace clover::server
