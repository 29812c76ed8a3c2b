// The tiled attention kernel against its scalar reference twin, on every instruction set the CPU
// has: odd head dims and key counts (partial tiles), GQA (rows sharing one KV head), causal rows
// and a denoising block's mask (all rows see the prefix and the whole block), every KV cache type.
// Also the property the forward pass relies on: a row's result does not depend on the other rows
// of the call (bitwise), so chunked prefill and decode steps agree exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/matmul.h"

namespace clover::kernels {
namespace {

constexpr Isa kIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512};
constexpr DType kTypes[] = {DType::F32, DType::F16, DType::Q8_0};

bool isa_available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(isa_best()); }

// A cache of n positions x n_kv heads x hd values of `type`, from N(0, sd) floats.
struct Cache {
  DType type;
  int hd, n_kv;
  size_t head_bytes, row_bytes;
  std::vector<uint8_t> bytes;
  Cache(DType t, int hd_, int n_kv_, int64_t n, std::mt19937& rng, float sd) : type(t), hd(hd_), n_kv(n_kv_) {
    head_bytes = dtype_row_bytes(t, hd);
    row_bytes = head_bytes * n_kv;
    bytes.resize(row_bytes * n);
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> row(static_cast<size_t>(hd) * n_kv);
    for (int64_t j = 0; j < n; ++j) {
      for (float& x : row) x = nd(rng);
      if (t == DType::Q8_0)
        quantize_row_q8_0_activation(row.data(), reinterpret_cast<BlockQ8_0*>(bytes.data() + j * row_bytes), hd * n_kv);
      else
        quantize_row(t, row.data(), bytes.data() + j * row_bytes, hd * n_kv);
    }
  }
  KvHeadRef head(int h) const { return {type, bytes.data() + h * head_bytes, row_bytes}; }
};

struct Rows {
  std::vector<std::vector<float>> q, o;
  std::vector<const float*> qp;
  std::vector<float*> op;
  std::vector<int64_t> n_keys;
  Rows(int n, int hd, std::mt19937& rng) : q(n, std::vector<float>(hd)), o(n, std::vector<float>(hd, NAN)), n_keys(n) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& r : q)
      for (float& x : r) x = nd(rng);
    for (int r = 0; r < n; ++r) qp.push_back(q[r].data()), op.push_back(o[r].data());
  }
  AttentionRows view(int begin, int count) { return {qp.data() + begin, op.data() + begin, n_keys.data() + begin, count}; }
};

using Param = std::tuple<Isa, DType>;
class AttentionKernel : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!isa_available(std::get<0>(GetParam()))) GTEST_SKIP() << "CPU lacks " << isa_name(std::get<0>(GetParam()));
    isa_force(std::get<0>(GetParam()));
  }
  void TearDown() override { isa_force(isa_best()); }
};

// hd values for a type: Q8_0 needs multiples of 32.
std::vector<int> head_dims(DType t) {
  if (t == DType::Q8_0) return {32, 96, 256};
  return {1, 5, 17, 32, 63, 128, 256};
}

TEST_P(AttentionKernel, MatchesReferenceCausalGqaAndBlockMask) {
  const DType type = std::get<1>(GetParam());
  std::mt19937 rng(1234);
  AttentionScratch scratch;
  for (int hd : head_dims(type)) {
    for (int64_t n_prefix : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{130}, int64_t{777}}) {
      for (bool block : {false, true}) {
        const int group = 1 + static_cast<int>(rng() % 4);  // query heads per KV head
        const int tokens = 1 + static_cast<int>(rng() % (kAttnMaxRows / group));
        const int n_kv = 2;
        // Larger K spreads the scores (a peaked softmax), smaller V keeps outputs O(1).
        Cache k(type, hd, n_kv, n_prefix + tokens, rng, 2.0f), v(type, hd, n_kv, n_prefix + tokens, rng, 1.0f);
        const int n = group * tokens;
        Rows got(n, hd, rng), want = got;
        for (int t = 0; t < tokens; ++t)
          for (int g = 0; g < group; ++g)
            got.n_keys[t * group + g] = want.n_keys[t * group + g] = block ? n_prefix + tokens : n_prefix + t + 1;
        want.qp.clear(), want.op.clear();
        for (int r = 0; r < n; ++r) want.qp.push_back(want.q[r].data()), want.op.push_back(want.o[r].data());
        const int kvh = static_cast<int>(rng() % n_kv);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        attention(got.view(0, n), hd, scale, k.head(kvh), v.head(kvh), scratch);
        attention_ref(want.view(0, n), hd, scale, k.head(kvh), v.head(kvh));
        for (int r = 0; r < n; ++r)
          for (int d = 0; d < hd; ++d)
            ASSERT_NEAR(got.o[r][d], want.o[r][d], 2e-5f * (1.0f + std::fabs(want.o[r][d])))
                << "hd " << hd << " prefix " << n_prefix << (block ? " block" : " causal") << " group " << group << " row " << r
                << " dim " << d;
      }
    }
  }
}

// Each row alone, in any grouping, gives the same bits as all rows in one call.
TEST_P(AttentionKernel, RowResultIndependentOfTheOtherRows) {
  const DType type = std::get<1>(GetParam());
  std::mt19937 rng(99);
  const int hd = type == DType::Q8_0 ? 64 : 40;
  const int n = kAttnMaxRows;
  const int64_t n_prefix = 300;
  Cache k(type, hd, 1, n_prefix + n, rng, 2.0f), v(type, hd, 1, n_prefix + n, rng, 1.0f);
  Rows all(n, hd, rng);
  // Runs of 1-5 rows share a key count (the query heads of one token), so the kernel's row groups
  // (4, 2 or 1 rows through a tile together) form differently in the whole call and in the parts.
  for (int r = 0, t = 0; r < n; ++t)
    for (int run = 1 + static_cast<int>(rng() % 5); run > 0 && r < n; --run) all.n_keys[r++] = n_prefix + t + 1;
  Rows parts = all;
  parts.qp.clear(), parts.op.clear();
  for (int r = 0; r < n; ++r) parts.qp.push_back(parts.q[r].data()), parts.op.push_back(parts.o[r].data());
  const float scale = 0.125f;
  AttentionScratch scratch;
  attention(all.view(0, n), hd, scale, k.head(0), v.head(0), scratch);
  for (int b = 0; b < n;) {
    const int c = std::min(n - b, 1 + static_cast<int>(rng() % 7));
    attention(parts.view(b, c), hd, scale, k.head(0), v.head(0), scratch);
    b += c;
  }
  for (int r = 0; r < n; ++r)
    for (int d = 0; d < hd; ++d) ASSERT_EQ(all.o[r][d], parts.o[r][d]) << "row " << r << " dim " << d;
}

// The tiled kernel (caches other than F32: the F32 cache takes the exact path).
TEST(AttentionKernelEdges, NoKeysGivesZerosAndScratchDoesNotGrowWithKeys) {
  std::mt19937 rng(5);
  const int hd = 16;
  Cache k(DType::F16, hd, 1, 5000, rng, 1.0f), v(DType::F16, hd, 1, 5000, rng, 1.0f);
  Rows rows(2, hd, rng);
  rows.n_keys = {0, 5000};
  AttentionScratch scratch;
  attention(rows.view(0, 2), hd, 0.25f, k.head(0), v.head(0), scratch);
  for (int d = 0; d < hd; ++d) EXPECT_EQ(rows.o[0][d], 0.0f);
  const size_t held = scratch.kt.capacity() + scratch.vt.capacity() + scratch.p.capacity() + scratch.acc.capacity();
  EXPECT_EQ(held, static_cast<size_t>(hd) * kAttnKeyTile * 2 + static_cast<size_t>(kAttnMaxRows) * (kAttnKeyTile + hd));
}

// The exact path (F32 cache, head_dim a multiple of 16): no keys give zeros, and every ISA gives
// the scalar twin's bits.
TEST(AttentionKernelEdges, ExactPathIsIsaInvariant) {
  std::mt19937 rng(8);
  const int hd = 64;
  Cache k(DType::F32, hd, 1, 700, rng, 2.0f), v(DType::F32, hd, 1, 700, rng, 1.0f);
  ASSERT_TRUE(attention_exact_fits(k.head(0), v.head(0), hd));
  Rows base(5, hd, rng);
  base.n_keys = {0, 1, 17, 333, 700};
  std::vector<std::vector<std::vector<float>>> outs;
  for (Isa isa : kIsas) {
    if (!isa_available(isa)) continue;
    isa_force(isa);
    Rows r = base;
    r.qp.clear(), r.op.clear();
    for (int i = 0; i < 5; ++i) r.qp.push_back(r.q[i].data()), r.op.push_back(r.o[i].data());
    AttentionScratch scratch;
    attention(r.view(0, 5), hd, 0.125f, k.head(0), v.head(0), scratch);
    outs.push_back(r.o);
  }
  isa_force(isa_best());
  for (int d = 0; d < hd; ++d) EXPECT_EQ(outs[0][0][d], 0.0f);
  for (size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[i], outs[0]) << "ISA " << i;
}

TEST(AttentionKernelEdges, KvTypeFitsHeadDim) {
  EXPECT_TRUE(kv_type_fits(DType::F16, 17));
  EXPECT_FALSE(kv_type_fits(DType::Q8_0, 48));
  EXPECT_TRUE(kv_type_fits(DType::Q8_0, 64));
  EXPECT_FALSE(kv_type_supported(DType::Q4_0));
}

INSTANTIATE_TEST_SUITE_P(All, AttentionKernel, ::testing::Combine(::testing::ValuesIn(kIsas), ::testing::ValuesIn(kTypes)),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace clover::kernels
