#include "server/json_limits.h"

#include <vector>

#include <nlohmann/json.hpp>

namespace clover::server {

namespace {

using json = nlohmann::json;

// Counts as it goes and stops the parser (returns false) at the first limit exceeded.
struct LimitScanner {
  const JsonLimits& lim;
  const std::string& subject;
  std::string error;
  bool invalid = false;
  size_t values = 0;
  std::vector<size_t> keys;  // keys seen so far in each open object; 0 for arrays

  bool value() {
    if (++values > lim.max_values) {
      error = subject + " holds more than " + std::to_string(lim.max_values) + " JSON values (the limit)";
      return false;
    }
    return true;
  }
  bool open() {
    if (!value()) return false;
    if (keys.size() >= static_cast<size_t>(lim.max_depth)) {
      error = subject + " nests deeper than " + std::to_string(lim.max_depth) + " levels";
      return false;
    }
    keys.push_back(0);
    return true;
  }
  bool close() {
    keys.pop_back();
    return true;
  }

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const std::string&) { return value(); }
  bool string(std::string&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool key(std::string&) {
    if (!keys.empty() && ++keys.back() > lim.max_object_keys) {
      error = "a JSON object in " + subject + " has more than " + std::to_string(lim.max_object_keys) + " keys (the limit)";
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    invalid = true;
    return false;
  }
};

}  // namespace

JsonScan scan_json(std::string_view text, const std::string& subject, const JsonLimits& limits) {
  LimitScanner s{limits, subject, {}, false, 0, {}};
  json::sax_parse(text, &s, nlohmann::detail::input_format_t::json, /*strict=*/true);
  return JsonScan{std::move(s.error), s.invalid};
}

}  // namespace clover::server
