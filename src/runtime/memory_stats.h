// Process memory figures, for load messages and benchmarks.
#pragma once
#include <cstdint>

namespace clover {
// Peak resident set size of this process in bytes (VmHWM), 0 if unknown.
int64_t peak_rss_bytes();
// Current resident set size in bytes (VmRSS), 0 if unknown.
int64_t current_rss_bytes();
}  // namespace clover
