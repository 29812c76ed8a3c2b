// A small fork-join thread pool for the forward pass.
//
// Why not std::async or OpenMP: a decode step issues hundreds of tiny parallel regions, so the cost
// that matters is wake-up latency. Workers spin briefly on an atomic generation counter before they
// sleep (futex via std::atomic::wait), and the calling thread always takes a share of the work, so a
// parallel region costs well under a microsecond when the workers are hot.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace clover {

class ThreadPool {
 public:
  // n_threads counts the calling thread: ThreadPool(1) runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index) once on every thread (0 = the caller) and returns when all are done.
  void run_on_all(const std::function<void(int)>& fn);

  // Splits [0, n) into contiguous ranges, one per thread, each a multiple of `grain`
  // (except the last), and calls fn(begin, end) for the non-empty ones.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// Splits [0, n) into `parts` ranges aligned to `grain`; returns range `part`.
inline void split_range(int64_t n, int64_t grain, int parts, int part, int64_t& begin, int64_t& end) {
  int64_t units = (n + grain - 1) / grain;
  int64_t per = units / parts, extra = units % parts;
  int64_t ub = part * per + (part < extra ? part : extra);
  int64_t ue = ub + per + (part < extra ? 1 : 0);
  begin = ub * grain < n ? ub * grain : n;
  end = ue * grain < n ? ue * grain : n;
}

}  // namespace clover
