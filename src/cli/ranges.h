// Range checks for numeric flags. CLI11's Range lets NaN through (every comparison with NaN is
// false) and accepts infinities for float flags; these refuse both and name the range, so that a
// wrong value is an error naming the flag instead of a silent misbehaviour or a bad_alloc.
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace clover::cli {

// Finite numbers in [lo, hi], or (lo, hi] with lo_open.
inline CLI::Validator in_range(double lo, double hi, bool lo_open = false) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%g, %g]", lo_open ? "(" : "[", lo, hi);
  const std::string range = buf;
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(s, &used);
        } catch (const std::exception&) {
          return "must be a number in " + range + " (got " + s + ")";
        }
        if (used != s.size() || !std::isfinite(v) || v > hi || (lo_open ? v <= lo : v < lo))
          return "must be a finite number in " + range + " (got " + s + ")";
        return "";
      },
      "in " + range);
}

// The context flag: 0 (the model's) up to 131,072 tokens.
constexpr int kMaxContext = 131072;
// Threads: 0 (all cores) up to this many.
constexpr int kMaxThreads = 1024;

}  // namespace clover::cli
