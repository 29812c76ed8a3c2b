// Timing helpers shared by the plain C++ benchmarks in bench/.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace clover::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Wall-clock seconds from a steady clock.
inline double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace clover::bench
