#include "runtime/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define CLOVER_PAUSE() _mm_pause()
#else
#define CLOVER_PAUSE() ((void)0)
#endif

namespace clover {

namespace {
// Spin iterations before a worker sleeps. About 50-100 us on current x86 cores: long enough to
// bridge the gap between two parallel regions of one forward pass, short enough not to burn a
// core while the engine idles.
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
      CLOVER_PAUSE();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0);
  // Spin while the workers are likely still running; then yield, so that a worker that lost its
  // core (more threads than free cores) gets it back quickly.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) CLOVER_PAUSE();
    else std::this_thread::yield();
  }
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int parts = n_threads_;
  if ((n + grain - 1) / grain < parts) parts = static_cast<int>((n + grain - 1) / grain);
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  run_on_all([&](int t) {
    if (t >= parts) return;
    int64_t b, e;
    split_range(n, grain, parts, t, b, e);
    if (b < e) fn(b, e);
  });
}

}  // namespace clover
