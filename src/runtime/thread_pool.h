// A small fork-join thread pool for the forward pass.
//
// Why not std::async or OpenMP: a decode step issues hundreds of tiny parallel regions, so the cost
// that matters is wake-up latency. Workers spin briefly on an atomic generation counter before they
// sleep (futex via std::atomic::wait), and the calling thread always takes a share of the work, so a
// parallel region costs well under a microsecond when the workers are hot.
//
// On a machine with more runnable threads than cores a worker may not run for milliseconds. A
// region that waits for every worker then costs a scheduler time slice (llama.cpp loses 11-15 ms
// per token this way at 2 threads on the 2-core development machine). parallel_for therefore hands
// out work in chunks from a shared counter and, once the caller finds no chunk left, closes the
// region: a worker that has not joined by then skips it, and the caller waits only for workers that
// are still inside.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
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

  // Calls fn(begin, end) on chunks covering [0, n) once, each chunk a multiple of `grain` long
  // (except the last). Threads take chunks in turn from a shared counter (about kChunksPerThread
  // chunks per thread), so a thread that lost its core does less of the work instead of holding up
  // the region, and one that never started is not waited for. Which thread runs a chunk varies
  // from call to call: fn must give the same result for an index whichever chunk it is in.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // The same, telling fn which thread runs the chunk (0 = the caller): for per-thread scratch.
  void parallel_for_on(int64_t n, int64_t grain, const std::function<void(int, int64_t, int64_t)>& fn);
  static constexpr int kChunksPerThread = 8;
  // The same with an owner per index: thread t first runs its own share, part t of size() equal
  // parts of [0, n) (split_range), in chunks (about kChunksPerThread a share), then takes what is
  // left of the others', so a late thread's share is done by the others and a thread that never
  // joined is not waited for. While every thread is on time the same indices run on the same
  // thread call after call: state that stays in memory between calls (the GDN state, read and
  // written back every decode step) stays in that core's caches (fetched from the other core's,
  // it cost up to half as much again on a 2-vCPU Zen 4 VM), and each thread streams one
  // contiguous run of a weight matrix's rows (docs/kernels.md, "Thread pool").
  void parallel_for_owned(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  // parallel_for_owned's shares, one per thread: the next unit to run and the share's end (units),
  // a cache line each.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  void worker_loop(int index);
  // Publishes fn as a new region; with `closable`, workers that join after close() skip it.
  void dispatch(const std::function<void(int)>& fn);
  void wait_all_joined_and_done();  // run_on_all: every worker runs the region
  void close_and_wait();            // parallel_for: only workers already inside are waited for
  // The parallel_for regions: units per chunk (about kChunksPerThread chunks a thread), and one
  // region of `take`, run by the caller too, closed once the caller is done with it.
  int64_t chunk_units(int64_t units) const;
  void run_closable(const std::function<void(int)>& take);

  int n_threads_;
  std::unique_ptr<Share[]> shares_;  // (after n_threads_: made from it)
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  // Bits 32-63: the region's generation; bit 31: closed; bits 16-30: workers that joined it;
  // bits 0-15: workers inside it. A worker's last access to a region is leaving it, and the caller
  // returns only when no worker is inside, so no access can reach the next region's slot.
  std::atomic<uint64_t> slot_{0};
  std::atomic<uint32_t> generation_{0};  // what sleeping workers wait on
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
