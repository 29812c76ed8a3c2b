#include "runtime/thread_pool.h"

#include <algorithm>

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
constexpr uint64_t kClosed = uint64_t{1} << 31;
constexpr uint64_t kJoinedOne = uint64_t{1} << 16;
constexpr uint64_t kJoinedMask = kClosed - kJoinedOne;
constexpr uint64_t kInsideMask = kJoinedOne - 1;

// Spins, then yields, so that a thread that lost its core (more threads than free cores) gets it back.
template <class Done>
void spin_until(Done&& done) {
  for (int spin = 0; !done(); ++spin) {
    if (spin < kSpinIterations) CLOVER_PAUSE();
    else std::this_thread::yield();
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), shares_(std::make_unique<Share[]>(static_cast<size_t>(n_threads_))) {
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
    // Join region g unless it was closed or already replaced by a later one (this worker was late).
    uint64_t s = slot_.load(std::memory_order_acquire);
    bool joined = false;
    while ((s >> 32) == g && !(s & kClosed)) {
      if (slot_.compare_exchange_weak(s, s + kJoinedOne + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    (*job_)(index);
    slot_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::dispatch(const std::function<void(int)>& fn) {
  job_ = &fn;
  const uint32_t g = generation_.load(std::memory_order_relaxed) + 1;
  slot_.store(uint64_t{g} << 32, std::memory_order_release);
  generation_.store(g, std::memory_order_release);
  generation_.notify_all();
}

void ThreadPool::wait_all_joined_and_done() {
  const uint64_t all_joined = static_cast<uint64_t>(n_threads_ - 1) * kJoinedOne;
  spin_until([&] {
    const uint64_t s = slot_.load(std::memory_order_acquire);
    return (s & kJoinedMask) == all_joined && (s & kInsideMask) == 0;
  });
}

void ThreadPool::close_and_wait() {
  slot_.fetch_or(kClosed, std::memory_order_acq_rel);
  spin_until([&] { return (slot_.load(std::memory_order_acquire) & kInsideMask) == 0; });
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  dispatch(fn);
  fn(0);
  wait_all_joined_and_done();
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  parallel_for_on(n, grain, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

void ThreadPool::parallel_for_on(int64_t n, int64_t grain, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t units = (n + grain - 1) / grain;
  if (n_threads_ == 1 || units <= 1) {
    fn(0, 0, n);
    return;
  }
  const int64_t per = chunk_units(units);
  std::atomic<int64_t> next{0};
  const std::function<void(int)> take_chunks = [&](int thread) {
    for (;;) {
      const int64_t u = next.fetch_add(per, std::memory_order_relaxed);
      if (u >= units) return;
      fn(thread, u * grain, std::min(n, (u + per) * grain));
    }
  };
  run_closable(take_chunks);
}

void ThreadPool::parallel_for_owned(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t units = (n + grain - 1) / grain;
  if (n_threads_ == 1 || units <= 1) {
    fn(0, n);
    return;
  }
  // (No worker of an earlier region is still inside: the shares are free to reuse.)
  for (int t = 0; t < n_threads_; ++t) {
    int64_t b, e;
    split_range(units, 1, n_threads_, t, b, e);
    shares_[t].next.store(b, std::memory_order_relaxed);
    shares_[t].end = e;
  }
  const int64_t per = chunk_units(units);  // about kChunksPerThread chunks a share
  const std::function<void(int)> take = [&](int thread) {
    for (int k = 0; k < n_threads_; ++k) {  // its own share first, then the others' in turn
      Share& s = shares_[(thread + k) % n_threads_];
      for (;;) {
        const int64_t u = s.next.fetch_add(per, std::memory_order_relaxed);
        if (u >= s.end) break;
        fn(u * grain, std::min({n, (u + per) * grain, s.end * grain}));
      }
    }
  };
  run_closable(take);
}

int64_t ThreadPool::chunk_units(int64_t units) const {
  return std::max<int64_t>(1, units / (int64_t{n_threads_} * kChunksPerThread));
}

void ThreadPool::run_closable(const std::function<void(int)>& take) {
  dispatch(take);
  take(0);
  close_and_wait();
  job_ = nullptr;
}

}  // namespace clover
