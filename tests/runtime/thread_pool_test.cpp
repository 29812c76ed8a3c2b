#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "runtime/thread_pool.h"

namespace clover {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000}) {
      for (int64_t grain : {1, 16, 100}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
          EXPECT_LT(b, e);
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, n " << n << ", grain " << grain;
      }
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
      if (e < 1003) EXPECT_EQ(e % 16, 0);
      next = e;
    }
    EXPECT_EQ(next, 1003);
  }
}

}  // namespace
}  // namespace clover
