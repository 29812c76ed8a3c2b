// moe_router.comp against the routing every backend shares (backend/routing.h, through moe_ref.h),
// argmax.comp against the greedy rule (ties to the lowest id), and select_top.comp against
// sampling::select_top_ref (the selection a pass returns instead of its logits rows).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/vulkan/moe_ops.h"
#include "backend/vulkan/ops.h"
#include "backend/vulkan/moe_ref.h"
#include "backend/vulkan/vk_test_util.h"
#include "sampling/row_top.h"
#include "kernels/vecmath.h"

namespace clover::vulkan::test {
namespace {

using RoutingTest = VulkanTest;

void check_router(Device& dev, int64_t tokens, int ne, int k, std::vector<float> logits, bool expect_ties) {
  Buffer lb = to_device(dev, logits);
  Buffer ib = dev.create_buffer(tokens * k * 4, MemoryPurpose::Scratch), wb = dev.create_buffer(tokens * k * 4, MemoryPurpose::Scratch);
  CommandList cl(dev);
  cl.begin();
  record_moe_router(cl, dev, whole(lb), tokens, ne, k, ne, whole(ib), whole(wb));
  cl.end();
  cl.run();
  const std::vector<int32_t> ids = from_device<int32_t>(dev, ib, tokens * k);
  const std::vector<float> w = from_device<float>(dev, wb, tokens * k);
  std::vector<int32_t> rid(k);
  std::vector<float> rw(k), gw, cw;
  int near_ties = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    float margin = 0;
    route_ref(&logits[t * ne], ne, k, rid.data(), rw.data(), &margin);
    const bool tie = margin <= 1e-6f * rw[0];
    near_ties += tie;
    if (!tie) {
      for (int j = 0; j < k; ++j) EXPECT_EQ(ids[t * k + j], rid[j]) << "token " << t << " slot " << j;
    }
    gw.insert(gw.end(), w.begin() + t * k, w.begin() + (t + 1) * k);
    cw.insert(cw.end(), rw.begin(), rw.end());
  }
  if (!expect_ties) {
    EXPECT_EQ(near_ties, 0);
  }
  const double e = nmse(gw.data(), cw.data(), gw.size());
  EXPECT_LE(e, 1e-7);
  std::printf("moe_router %d experts top-%d: ids equal on %lld tokens (%d near ties), weight NMSE %.3g\n", ne, k,
              static_cast<long long>(tokens - near_ties), near_ties, e);
}

TEST_F(RoutingTest, RouterMatchesTheCpuRouting) {
  check_router(dev(), 37, 256, 8, random_floats(37 * 256, 21, -4.0f, 4.0f), false);
  check_router(dev(), 9, 61, 5, random_floats(9 * 61, 22, -2.0f, 2.0f), false);
  check_router(dev(), 5, 512, 16, random_floats(5 * 512, 23, -4.0f, 4.0f), false);  // the shader's bounds
}

// Exact ties (equal logits) go to the lower expert id on both sides, bit for bit.
TEST_F(RoutingTest, RouterBreaksExactTiesToTheLowerId) {
  const int ne = 64, k = 4, tokens = 3;
  std::vector<float> logits(tokens * ne, 0.0f);
  for (int e : {40, 9, 33, 50, 2}) logits[0 * ne + e] = 1.0f;  // five tied winners: ids 2, 9, 33, 40
  for (int e = 0; e < ne; ++e) logits[1 * ne + e] = static_cast<float>(e % 8);  // ties at 7: 7, 15, 23, 31
  // token 2: all equal, the first four ids
  Buffer lb = to_device(dev(), logits);
  Buffer ib = dev().create_buffer(tokens * k * 4, MemoryPurpose::Scratch), wb = dev().create_buffer(tokens * k * 4, MemoryPurpose::Scratch);
  CommandList cl(dev());
  cl.begin();
  record_moe_router(cl, dev(), whole(lb), tokens, ne, k, ne, whole(ib), whole(wb));
  cl.end();
  cl.run();
  EXPECT_EQ(from_device<int32_t>(dev(), ib, tokens * k),
            (std::vector<int32_t>{2, 9, 33, 40, 7, 15, 23, 31, 0, 1, 2, 3}));
  const std::vector<float> w = from_device<float>(dev(), wb, tokens * k);
  for (float v : w) EXPECT_FLOAT_EQ(v, 0.25f);
  EXPECT_THROW(record_moe_router(cl, dev(), whole(lb), 1, 600, 8, 600, whole(ib), whole(wb)), VulkanError);
}

TEST_F(RoutingTest, ArgmaxMatchesTheGreedyRule) {
  const int64_t rows = 5, n = 50021, stride = 50024;  // odd row length, padded rows
  std::vector<float> x = random_floats(static_cast<size_t>(rows * stride), 31, -10.0f, 10.0f);
  x[0 * stride + 49999] = 20.0f;                              // a clear winner near the end
  x[1 * stride + 7] = x[1 * stride + 30000] = 25.0f;          // a tie: the lower index
  x[2 * stride + 0] = 30.0f;                                  // the first entry
  x[3 * stride + n - 1] = 30.0f;                              // the last entry
  x[3 * stride + n] = 99.0f;                                  // padding past n is not read
  for (int64_t i = 0; i < n; ++i) x[4 * stride + i] = -1.0f;  // all equal: index 0
  Buffer xb = to_device(dev(), x);
  Buffer best = dev().create_buffer(rows * 8, MemoryPurpose::Scratch, Residency::Host);
  CommandList cl(dev());
  cl.begin();
  record_argmax(cl, dev(), whole(xb), rows, n, stride, whole(best));
  cl.end();
  cl.run();
  const auto* r = static_cast<const uint32_t*>(best.mapped());
  for (int64_t row = 0; row < rows; ++row) {
    const float* v = &x[row * stride];
    const int64_t ref = std::max_element(v, v + n) - v;  // the first of the largest
    EXPECT_EQ(r[2 * row], static_cast<uint32_t>(ref)) << "row " << row;
    float val;
    std::memcpy(&val, &r[2 * row + 1], 4);
    EXPECT_EQ(val, v[ref]);
  }
}

TEST_F(RoutingTest, SelectTopMatchesTheReference) {
  const int64_t rows = 7, n = 50021, stride = 50024;  // odd row length, padded rows
  std::vector<float> x = random_floats(static_cast<size_t>(rows * stride), 41, -10.0f, 10.0f);
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  x[0 * stride + 49999] = 20.0f;                                   // a clear winner near the end
  x[1 * stride + 7] = x[1 * stride + 30000] = x[1 * stride + 9] = 25.0f;  // ties: the lower ids first
  x[2 * stride + 0] = nan, x[2 * stride + 5] = nan, x[2 * stride + 6] = 40.0f;  // NaN skipped
  x[3 * stride + n] = 99.0f;                                       // padding past n is not read
  for (int64_t i = 0; i < n; ++i) x[4 * stride + i] = -1.0f;       // all equal: ids ascending
  for (int64_t i = 0; i < n; ++i) x[5 * stride + i] = -inf;        // no maximum: normaliser 0
  for (int64_t i = 0; i < 100; ++i) x[6 * stride + i * 13] = -inf; // some -inf, kept in order
  x[6 * stride + 3] = 60.0f;                                       // probability ~1: log1p of a tiny rest
  Buffer xb = to_device(dev(), x);
  for (int k : {1, 2, 41, sampling::kMaxTop}) {
    const uint64_t words = select_top_words(k);
    Buffer out = dev().create_buffer(rows * words * 4, MemoryPurpose::Scratch, Residency::Host);
    CommandList cl(dev());
    cl.begin();
    record_select_top(cl, dev(), whole(xb), rows, n, stride, k, whole(out));
    cl.end();
    cl.run();
    const auto* w = static_cast<const uint32_t*>(out.mapped());
    for (int64_t row = 0; row < rows; ++row) {
      sampling::RowTop got, want;
      read_row_top(w + row * words, k, got);
      sampling::select_top_ref(&x[row * stride], n, k, want);
      ASSERT_EQ(got.n, want.n) << "row " << row << ", k " << k;
      for (int i = 0; i < want.n; ++i) {
        EXPECT_EQ(got.top[i].id, want.top[i].id) << "row " << row << ", k " << k << ", entry " << i;
        EXPECT_EQ(got.top[i].logit, want.top[i].logit) << "row " << row << ", k " << k << ", entry " << i;
      }
      EXPECT_EQ(got.max_logit, want.max_logit) << "row " << row;
      // A float sum of ~50k terms on the device against the sampler's double sum.
      EXPECT_NEAR(got.log1p_rest, want.log1p_rest, 1e-5 * std::max(1.0, want.log1p_rest)) << "row " << row;
      if (row == 6) {
        EXPECT_LT(want.log1p_rest, 1e-15);  // the precise case the log1p form is for
      }
    }
  }
}

// Routing and grouping in one dispatch (moe_router.comp GROUP: the last workgroup to route groups
// the pass) against the two dispatches: ids, weights and groups bitwise equal, for a decode step,
// a block pass and a prefill over 512 experts; the count word is left at 0, so the same list
// runs twice in a row (two layers in one list, and the list submitted again) with the same bits.
TEST_F(RoutingTest, RoutingAndGroupingInOneDispatchAreBitwiseTheTwo) {
  struct Case {
    int64_t tokens;
    int ne, k;
  };
  for (const Case& c : {Case{1, 256, 8}, Case{32, 256, 8}, Case{300, 512, 16}, Case{7, 61, 5}}) {
    const std::vector<float> logits = random_floats(static_cast<size_t>(c.tokens * c.ne), 31 + c.ne, -4.0f, 4.0f);
    const int64_t n = c.tokens * c.k, ng = moe_group_ints(c.ne, c.tokens, c.k);
    Buffer lb = to_device(dev(), logits), done = to_device(dev(), std::vector<uint32_t>{0u});
    auto scratch = [&](int64_t words) { return dev().create_buffer(words * 4, MemoryPurpose::Scratch); };
    Buffer ids[3] = {scratch(n), scratch(n), scratch(n)}, wts[3] = {scratch(n), scratch(n), scratch(n)};
    Buffer grp[3] = {scratch(ng), scratch(ng), scratch(ng)};
    CommandList cl(dev());
    cl.begin();
    record_moe_router(cl, dev(), whole(lb), c.tokens, c.ne, c.k, c.ne, whole(ids[0]), whole(wts[0]));
    record_moe_group(cl, dev(), whole(ids[0]), c.tokens, c.ne, c.k, whole(grp[0]));
    for (int r = 1; r < 3; ++r)
      record_moe_route_and_group(cl, dev(), whole(lb), c.tokens, c.ne, c.k, c.ne, whole(ids[r]), whole(wts[r]), whole(grp[r]),
                                 whole(done));
    cl.end();
    for (int submit = 0; submit < 2; ++submit) {
      cl.run();
      for (int r = 1; r < 3; ++r) {
        const std::string what = fmt::format("{} tokens, {} experts, top-{}, fused run {}, submission {}", c.tokens, c.ne,
                                             c.k, r, submit);
        EXPECT_EQ(from_device<int32_t>(dev(), ids[r], n), from_device<int32_t>(dev(), ids[0], n)) << what;
        EXPECT_EQ(from_device<float>(dev(), wts[r], n), from_device<float>(dev(), wts[0], n)) << what;
        EXPECT_EQ(from_device<int32_t>(dev(), grp[r], ng), from_device<int32_t>(dev(), grp[0], ng)) << what;
      }
      EXPECT_EQ(from_device<uint32_t>(dev(), done, 1), std::vector<uint32_t>{0u});
    }
  }
}

}  // namespace
}  // namespace clover::vulkan::test
