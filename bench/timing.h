// Timing helpers shared by the plain C++ benchmarks in bench/.
#pragma once
#include "runtime/huge_pages.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <new>
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

// Zeroed anonymous memory in transparent huge pages (runtime/huge_pages.h), as the engine holds
// the weights under --no-mmap: a buffer of 4 KiB pages (std::vector's, where THP is "madvise")
// streams measurably slower from DRAM (TLB misses), which would understate the roofline. Throws
// std::bad_alloc.
class HugeBuffer {
 public:
  explicit HugeBuffer(size_t bytes) : size_(bytes), data_(static_cast<uint8_t*>(runtime::map_huge(bytes))) {
    if (!data_) throw std::bad_alloc();
  }
  ~HugeBuffer() { runtime::unmap_huge(data_, size_); }
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  uint8_t* data_;
};

}  // namespace clover::bench
