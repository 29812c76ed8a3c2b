// Limits on the JSON a client sends, checked in one linear pass before any DOM is built.
//
// nlohmann::ordered_json finds an object's keys by a linear search, so an object of n keys costs
// O(n^2) to build (150,000 keys: ~11 s of a core), and every later walk of the value (copies,
// the chat layer's normalisation, rendering) recurses once per nesting level. A body is therefore
// scanned with nlohmann's SAX parser first, which costs O(size) and keeps no tree; only a body
// within every limit is parsed into a DOM. Each limit, when exceeded, is a 400 naming it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace clover::server {

struct JsonLimits {
  int max_depth = 128;                // nesting levels (arrays and objects)
  size_t max_values = 1u << 18;       // every value counted once (262,144: a 131,072-token prompt fits twice)
  size_t max_object_keys = 256;       // keys in one object
};

// Outcome of a scan: empty `error` when the text is within the limits (it may still be invalid
// JSON; the DOM parse reports that). `error` names `subject` and the limit that was exceeded.
struct JsonScan {
  std::string error;
  bool invalid = false;  // a syntax error was found before any limit was exceeded
};

JsonScan scan_json(std::string_view text, const std::string& subject = "the request body", const JsonLimits& limits = {});

}  // namespace clover::server
