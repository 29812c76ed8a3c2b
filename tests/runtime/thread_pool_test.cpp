#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <algorithm>
#include <vector>

#include "runtime/thread_pool.h"

namespace clover {
namespace {

// parallel_for and parallel_for_owned: every index once, in chunks aligned to the grain.
TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (bool owned : {false, true}) {
    for (int threads : {1, 2, 3, 5}) {
      ThreadPool pool(threads);
      for (int64_t n : {0, 1, 7, 64, 1000}) {
        for (int64_t grain : {1, 16, 100}) {
          std::vector<std::atomic<int>> hits(n);
          const auto fn = [&](int64_t b, int64_t e) {
            EXPECT_LT(b, e);
            EXPECT_EQ(b % grain, 0);
            EXPECT_TRUE(e % grain == 0 || e == n);
            for (int64_t i = b; i < e; ++i) hits[i]++;
          };
          if (owned) pool.parallel_for_owned(n, grain, fn);
          else pool.parallel_for(n, grain, fn);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(hits[i].load(), 1) << (owned ? "owned, " : "") << threads << " threads, n " << n << ", grain " << grain;
        }
      }
    }
  }
}

// parallel_for_on names the thread running a chunk: the caller is 0, every index is in [0, size),
// one thread's index is never in two chunks at once (per-thread scratch is safe), and the caller's
// own chunks carry 0.
TEST(ThreadPool, ParallelForOnNamesTheThreadOfEachChunk) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 50; ++round) {
      std::vector<std::atomic<int>> hits(257), busy(threads);
      std::atomic<int> overlaps{0}, bad_index{0}, caller_not_zero{0};
      const auto caller = std::this_thread::get_id();
      pool.parallel_for_on(257, 1 + round % 4, [&](int thread, int64_t b, int64_t e) {
        if (thread < 0 || thread >= threads) {
          ++bad_index;
          return;
        }
        if (busy[thread].fetch_add(1) != 0) ++overlaps;
        if ((std::this_thread::get_id() == caller) != (thread == 0)) ++caller_not_zero;
        for (int64_t i = b; i < e; ++i) hits[i]++;
        busy[thread].fetch_sub(1);
      });
      ASSERT_EQ(bad_index.load(), 0);
      ASSERT_EQ(overlaps.load(), 0);
      ASSERT_EQ(caller_not_zero.load(), 0);
      for (int i = 0; i < 257; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, round " << round;
    }
  }
}

// A thread that stalls (as on a busy machine) does not hold the others' share: they take the
// remaining chunks.
TEST(ThreadPool, ParallelForLetsOtherThreadsTakeAStalledThreadsChunks) {
  ThreadPool pool(2);
  std::atomic<int> chunks_by_caller{0}, chunks_total{0};
  const auto caller = std::this_thread::get_id();
  pool.parallel_for(1600, 1, [&](int64_t, int64_t) {
    ++chunks_total;
    if (std::this_thread::get_id() == caller) {
      ++chunks_by_caller;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  EXPECT_EQ(chunks_total.load(), 2 * ThreadPool::kChunksPerThread);
  EXPECT_LT(chunks_by_caller.load(), ThreadPool::kChunksPerThread);  // a static split would give it half
}

// While both threads are on time each runs its own share (the caller the first half), call after
// call. Work items take 3 ms, so a worker that joins within 12 ms sees its share whole; at least
// one of 20 calls must show the split exactly (a shared counter would interleave the threads'
// indices in every call).
TEST(ThreadPool, ParallelForOwnedKeepsEachShareOnItsThread) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  int exact = 0;
  for (int round = 0; round < 20 && exact == 0; ++round) {
    std::vector<std::thread::id> ran(8);
    pool.parallel_for_owned(8, 1, [&](int64_t b, int64_t e) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      for (int64_t i = b; i < e; ++i) ran[i] = std::this_thread::get_id();
    });
    bool ok = ran[4] != caller;
    for (int i = 0; i < 8; ++i) ok = ok && ran[i] == (i < 4 ? caller : ran[4]);
    exact += ok;
  }
  EXPECT_GT(exact, 0);
}

// A stalled thread's share is taken by the others: the worker stalls 50 ms on its first item
// while the caller, done with its own share in 8 ms, runs the rest of the worker's.
TEST(ThreadPool, ParallelForOwnedLetsOtherThreadsTakeAStalledThreadsShare) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> by_caller{0};
  pool.parallel_for_owned(16, 1, [&](int64_t, int64_t) {
    const bool on_caller = std::this_thread::get_id() == caller;
    by_caller += on_caller;
    std::this_thread::sleep_for(std::chrono::milliseconds(on_caller ? 1 : 50));
  });
  EXPECT_GE(by_caller.load(), 12) << "the worker's share waited for it";
}

// More threads than cores: workers are often late, join closed parallel_for regions or find them
// replaced by the next one. Every index must still run once per region and every run_on_all
// region on every thread.
TEST(ThreadPool, MixedRegionsWithLateWorkers) {
  ThreadPool pool(5);
  std::vector<int> hits(37);
  std::atomic<int> ran{0};
  for (int round = 0; round < 600; ++round) {
    std::fill(hits.begin(), hits.end(), 0);
    pool.parallel_for(37, 1 + round % 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;  // chunks are disjoint: no data race
    });
    for (int i = 0; i < 37; ++i) ASSERT_EQ(hits[i], 1) << "round " << round << ", index " << i;
    std::fill(hits.begin(), hits.end(), 0);
    pool.parallel_for_owned(37, 1 + round % 2, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int i = 0; i < 37; ++i) ASSERT_EQ(hits[i], 1) << "owned, round " << round << ", index " << i;
    if (round % 7 == 0) {
      ran = 0;
      pool.run_on_all([&](int) { ++ran; });
      ASSERT_EQ(ran.load(), 5) << "round " << round;
    }
  }
}

TEST(ThreadPool, RunOnAllRunsEveryThreadAndManyRegionsInARow) {
  ThreadPool pool(3);
  std::atomic<int> sum{0};
  for (int round = 0; round < 500; ++round) pool.run_on_all([&](int t) { sum += t + 1; });
  EXPECT_EQ(sum.load(), 500 * (1 + 2 + 3));
}

TEST(ThreadPool, SplitRangeIsContiguousAndGrainAligned) {
  for (int parts : {1, 2, 4}) {
    int64_t next = 0;
    for (int p = 0; p < parts; ++p) {
      int64_t b, e;
      split_range(1003, 16, parts, p, b, e);
      EXPECT_EQ(b, next);
      if (e < 1003) {
        EXPECT_EQ(e % 16, 0);
      }
      next = e;
    }
    EXPECT_EQ(next, 1003);
  }
}

}  // namespace
}  // namespace clover
