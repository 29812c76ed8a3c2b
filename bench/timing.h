// Timing helpers shared by the plain C++ benchmarks in bench/.
#pragma once
#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

namespace clover::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Wall-clock seconds from a steady clock.
inline double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds of the whole process (all threads, spinning workers and lavapipe's included): on a
// shared machine steadier than the wall time. cpu_now(CLOCK_THREAD_CPUTIME_ID): the calling thread's.
inline double cpu_now(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace clover::bench
