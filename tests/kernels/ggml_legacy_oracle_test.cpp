// Q4_1, Q5_0, Q5_1, IQ4_NL against the prebuilt ggml (ggml_lib.h): the Q8_1 activation quantiser, the
// dequantisers, the quality of this project's quantiser next to ggml's reference one, and the dot
// products of the twins and of every SIMD path (ggml_vec_dot_q4_1_q8_1, _q5_0_q8_0, _q5_1_q8_1, _iq4_nl_q8_0; IQ4_NL's repacked gemv / gemm)
// on random odd shapes, on weights from both quantisers. Skipped when ggml is missing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "ggml_lib.h"
#include "kernels/convert.h"
#include "kernels/legacy_quant.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels {
namespace {

using RowFn = void (*)(const float*, void*, int64_t);
using DequantFn = void (*)(const void*, float*, int64_t);
using DotFn = void (*)(int, float*, size_t, const void*, size_t, const void*, size_t, int);

struct LegacyGgml {
  RowFn q8_1_act = nullptr;
  std::string why;
  struct PerType {
    DType t;
    RowFn quant = nullptr;
    DequantFn dequant = nullptr;
    DotFn dot = nullptr;
  };
  std::vector<PerType> types;

  LegacyGgml() {
    const auto& g = testing::ggml_libs();
    why = g.why;
    if (!why.empty()) return;
    q8_1_act = g.sym<RowFn>(g.cpu, "quantize_row_q8_1");
    const struct { DType t; const char* q; const char* dq; const char* dot; } names[] = {
        {DType::Q4_1, "quantize_row_q4_1_ref", "dequantize_row_q4_1", "ggml_vec_dot_q4_1_q8_1"},
        {DType::Q5_0, "quantize_row_q5_0_ref", "dequantize_row_q5_0", "ggml_vec_dot_q5_0_q8_0"},
        {DType::Q5_1, "quantize_row_q5_1_ref", "dequantize_row_q5_1", "ggml_vec_dot_q5_1_q8_1"},
        {DType::IQ4_NL, "quantize_row_iq4_nl_ref", "dequantize_row_iq4_nl", "ggml_vec_dot_iq4_nl_q8_0"},
    };
    for (const auto& n : names) {
      PerType p{n.t, g.sym<RowFn>(g.base, n.q), g.sym<DequantFn>(g.base, n.dq), g.sym<DotFn>(g.cpu, n.dot)};
      if (!p.quant || !p.dequant || !p.dot) why = std::string("ggml symbols missing for ") + std::string(dtype_name(n.t));
      types.push_back(p);
    }
    if (!q8_1_act) why = "quantize_row_q8_1 missing";
  }
  bool ok() const { return why.empty(); }
};

const LegacyGgml& lg() {
  static LegacyGgml g;
  return g;
}

#define REQUIRE_LGGML() \
  if (!lg().ok()) GTEST_SKIP() << lg().why

// Normal values with some blocks of zeros, of tiny values and of one sign only.
std::vector<float> block_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(rng);
  for (int64_t b = 0; b < n / 32; ++b) {
    float* v = x.data() + b * 32;
    if (b % 11 == 3) std::fill(v, v + 32, 0.0f);
    if (b % 11 == 5) for (int j = 0; j < 32; ++j) v[j] *= 1e-6f;
    if (b % 11 == 6) for (int j = 0; j < 32; ++j) v[j] = std::fabs(v[j]);
    if (b % 11 == 8) for (int j = 0; j < 32; ++j) v[j] = -std::fabs(v[j]) - 2.0f;
  }
  return x;
}

std::vector<uint8_t> quantise_rows(DType t, const float* x, int64_t rows, int64_t cols, RowFn ggml) {
  const size_t rb = dtype_row_bytes(t, cols);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t o = 0; o < rows; ++o) {
    if (ggml) ggml(x + o * cols, w.data() + o * rb, cols);
    else quantize_row(t, x + o * cols, w.data() + o * rb, cols);
  }
  return w;
}

TEST(GgmlLegacyQuant, Q8_1ActivationQuantiserIsBitIdentical) {
  REQUIRE_LGGML();
  const int64_t n = 32 * 77;
  const std::vector<float> x = block_values(n, 1);
  std::vector<BlockQ8_1> ours(n / 32), theirs(n / 32);
  quantize_row_q8_1_activation(x.data(), ours.data(), n);
  lg().q8_1_act(x.data(), theirs.data(), n);
  EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data(), ours.size() * sizeof(BlockQ8_1)));
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
    isa_force(isa);
    ActRows a;
    a.convert(x.data(), 1, n, n, DType::Q8_1);
    isa_force(isa_best());
    EXPECT_EQ(0, std::memcmp(a.row(0), theirs.data(), theirs.size() * sizeof(BlockQ8_1))) << isa_name(isa);
  }
}

TEST(GgmlLegacyQuant, DequantisersAreBitIdentical) {
  REQUIRE_LGGML();
  const int64_t n = 32 * 53;
  const std::vector<float> x = block_values(n, 2);
  for (const auto& p : lg().types)
    for (bool ggml_quantised : {false, true}) {
      const std::vector<uint8_t> q = quantise_rows(p.t, x.data(), 1, n, ggml_quantised ? p.quant : nullptr);
      std::vector<float> ours(n), theirs(n);
      dequantize_row(p.t, q.data(), ours.data(), n);
      p.dequant(q.data(), theirs.data(), n);
      EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data(), n * sizeof(float)))
          << dtype_name(p.t) << (ggml_quantised ? " (ggml's quantiser)" : " (ours)");
    }
}

// Round trip: our quantiser's error is no worse than ggml's reference quantiser on normal data,
// and stays under a bound per type (RMSE relative to the RMS of the data, unit normal values).
TEST(GgmlLegacyQuant, OwnQuantiserRoundTripBounds) {
  REQUIRE_LGGML();
  const int64_t n = 32 * 2048;
  std::vector<float> x(n);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  const struct { DType t; double bound; } bounds[] = {{DType::Q4_1, 0.075}, {DType::Q5_0, 0.043}, {DType::Q5_1, 0.036}, {DType::IQ4_NL, 0.078}};
  for (const auto& p : lg().types) {
    double err[2] = {};
    for (int who = 0; who < 2; ++who) {
      const std::vector<uint8_t> q = quantise_rows(p.t, x.data(), 1, n, who ? p.quant : nullptr);
      std::vector<float> y(n);
      dequantize_row(p.t, q.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) err[who] += double(y[i] - x[i]) * (y[i] - x[i]);
    }
    const double rmse = std::sqrt(err[0] / n), ggml_rmse = std::sqrt(err[1] / n);
    EXPECT_LE(rmse, ggml_rmse) << dtype_name(p.t);
    for (const auto& b : bounds) {
      if (b.t != p.t) continue;
      EXPECT_LT(rmse, b.bound) << dtype_name(p.t) << " rmse " << rmse << " (ggml " << ggml_rmse << ")";
    }
    std::printf("%s: rmse %.5f, ggml's reference quantiser %.5f\n", std::string(dtype_name(p.t)).c_str(), rmse, ggml_rmse);
  }
}

// The twins give ggml_vec_dot's bits, and so does every matmul path, on random odd shapes
// (odd numbers of rows, blocks and activation rows, random splits of the output rows, routed
// activation rows as MoE experts get them).
TEST(GgmlLegacyQuant, VecDotTwinsAndPathsAreBitIdentical) {
  REQUIRE_LGGML();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 6; ++trial) {
    // Trials 0 and 1 have 8k rows: IQ4_NL's repacked order (the others take vec_dot's).
    const int64_t rows = trial < 2 ? 8 * (1 + trial) : 1 + rng() % 23, cols = 32 * (1 + rng() % 37), n_act = 1 + rng() % 7;
    const std::vector<float> xw = block_values(rows * cols, 100 + trial), xa = block_values(n_act * cols, 200 + trial);
    for (const auto& p : lg().types) {
      const DType at = activation_type(p.t);
      ActRows a;
      a.convert(xa.data(), n_act, cols, cols, at);
      std::vector<int32_t> sel(n_act + 2);
      for (auto& s : sel) s = static_cast<int32_t>(rng() % n_act);
      for (bool ggml_quantised : {false, true}) {
        const std::vector<uint8_t> w = quantise_rows(p.t, xw.data(), rows, cols, ggml_quantised ? p.quant : nullptr);
        const size_t rb = dtype_row_bytes(p.t, cols);
        const MatRef m{p.t, w.data(), rows, cols, rb};
        std::vector<float> want(n_act * rows), want_sel(n_act * rows);
        const int64_t split = rng() % (rows + 1);
        for (int64_t r = 0; r < n_act; ++r)
          for (int64_t o = 0; o < rows; ++o) {
            float ggml = 0;
            p.dot(static_cast<int>(cols), &ggml, 0, w.data() + o * rb, 0, a.row(r), 0, 1);
            // The twin of vec_dot's order gives its bits; the paths follow the twin of the order
            // llama.cpp takes for this matrix (the same one except for IQ4_NL with 8k rows).
            const float lanes = p.t == DType::IQ4_NL
                                    ? detail::iq4_nl_dot_lanes8_ref(reinterpret_cast<const BlockIQ4_NL*>(w.data() + o * rb),
                                                                    static_cast<const BlockQ8_0*>(a.row(r)), cols / 32)
                                    : detail::legacy_dot_ref(p.t, w.data() + o * rb, a.row(r), cols, rows, SumOrder::VecDot);
            EXPECT_EQ(lanes, ggml) << dtype_name(p.t) << " twin row " << o;
            // Dense products (Gemm) below `split`, expert products (VecDot) from it.
            const SumOrder order = o < split ? SumOrder::Gemm : SumOrder::VecDot;
            want[r * rows + o] = detail::legacy_dot_ref(p.t, w.data() + o * rb, a.row(r), cols, rows, order);
            want_sel[r * rows + o] = detail::legacy_dot_ref(p.t, w.data() + o * rb, a.row(r), cols, rows, SumOrder::VecDot);
            if (p.t != DType::IQ4_NL || (rows % 8 != 0 && order == SumOrder::VecDot)) EXPECT_EQ(want[r * rows + o], ggml);
            else EXPECT_NEAR(want[r * rows + o], ggml, 1e-4f * (1.0f + std::fabs(ggml)));
          }
        for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
          if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
          isa_force(isa);
          std::vector<float> y(n_act * rows), ys(sel.size() * rows);
          matmul(m, a, y.data(), rows, 0, split);
          matmul(m, a, y.data(), rows, split, rows, SumOrder::VecDot);
          matmul_selected(m, a, sel.data(), static_cast<int64_t>(sel.size()), ys.data(), rows, 0, rows, SumOrder::VecDot);
          isa_force(isa_best());
          for (int64_t r = 0; r < n_act; ++r)
            for (int64_t o = 0; o < rows; ++o)
              EXPECT_EQ(y[r * rows + o], want[r * rows + o]) << dtype_name(p.t) << " " << isa_name(isa) << " row " << o
                                                             << (ggml_quantised ? " ggml-quantised" : "");
          for (size_t i = 0; i < sel.size(); ++i)
            for (int64_t o = 0; o < rows; ++o)
              EXPECT_EQ(ys[i * rows + o], want_sel[sel[i] * rows + o]) << dtype_name(p.t) << " " << isa_name(isa) << " selected";
        }
      }
    }
  }
}

// llama.cpp's repacked IQ4_NL layout for 8 rows (block_iq4_nlx8): the 8 rows' fp16 d, then the
// rows' qs interleaved in chunks of 8 bytes (chunk i: row i % 8, bytes 8 (i / 8) ..).
struct BlockIQ4_NLx8 {
  uint16_t d[8];
  uint8_t qs[128];
};

// The blocks twin gives the bits of llama.cpp's repacked kernels: the single-row gemv (decoding,
// MoE experts) and the 4-row gemm (prompt batches), on our and on ggml's weights.
TEST(GgmlLegacyQuant, IQ4NLBlockTwinIsGgmlRepackedGemvAndGemm) {
  REQUIRE_LGGML();
  using GemFn = void (*)(int, float*, size_t, const void*, const void*, int, int);
  using MatQFn = void (*)(const float*, void*, int64_t);
  const auto& g = testing::ggml_libs();
  const auto gemv = g.sym<GemFn>(g.cpu, "ggml_gemv_iq4_nl_8x8_q8_0");
  const auto gemm = g.sym<GemFn>(g.cpu, "ggml_gemm_iq4_nl_8x8_q8_0");
  const auto mat_q8_0 = g.sym<MatQFn>(g.cpu, "ggml_quantize_mat_q8_0_4x8");
  if (!gemv || !gemm || !mat_q8_0) GTEST_SKIP() << "ggml's repacked IQ4_NL kernels are not exported";
  const int64_t rows = 16, cols = 32 * 13, nb = cols / 32, n_act = 4;
  const std::vector<float> xw = block_values(rows * cols, 8), xa = block_values(n_act * cols, 9);
  const size_t rb = dtype_row_bytes(DType::IQ4_NL, cols);
  ActRows a;
  a.convert(xa.data(), n_act, cols, cols, DType::Q8_0);
  std::vector<uint8_t> act4(static_cast<size_t>(nb) * (4 * sizeof(uint16_t) + 128));
  mat_q8_0(xa.data(), act4.data(), cols);
  for (bool ggml_quantised : {false, true}) {
    const std::vector<uint8_t> w = quantise_rows(DType::IQ4_NL, xw.data(), rows, cols, ggml_quantised ? lg().types[3].quant : nullptr);
    std::vector<BlockIQ4_NLx8> packed(static_cast<size_t>(rows / 8 * nb));
    for (int64_t g8 = 0; g8 < rows / 8; ++g8)
      for (int64_t b = 0; b < nb; ++b) {
        BlockIQ4_NLx8& out = packed[g8 * nb + b];
        for (int r = 0; r < 8; ++r) out.d[r] = reinterpret_cast<const BlockIQ4_NL*>(w.data() + (8 * g8 + r) * rb)[b].d;
        for (int i = 0; i < 16; ++i)
          std::memcpy(out.qs + 8 * i, reinterpret_cast<const BlockIQ4_NL*>(w.data() + (8 * g8 + i % 8) * rb)[b].qs + 8 * (i / 8), 8);
      }
    std::vector<float> y_gemm(n_act * rows);
    gemm(static_cast<int>(cols), y_gemm.data(), rows, packed.data(), act4.data(), static_cast<int>(n_act), static_cast<int>(rows));
    for (int64_t r = 0; r < n_act; ++r) {
      std::vector<float> y_gemv(rows);
      gemv(static_cast<int>(cols), y_gemv.data(), rows, packed.data(), a.row(r), 1, static_cast<int>(rows));
      for (int64_t o = 0; o < rows; ++o) {
        const auto* wr = reinterpret_cast<const BlockIQ4_NL*>(w.data() + o * rb);
        const float twin = detail::iq4_nl_dot_blocks_ref(wr, static_cast<const BlockQ8_0*>(a.row(r)), nb);
        EXPECT_EQ(twin, y_gemv[o]) << "gemv act " << r << " row " << o << (ggml_quantised ? " ggml-quantised" : "");
        EXPECT_EQ(twin, y_gemm[r * rows + o]) << "gemm act " << r << " row " << o << (ggml_quantised ? " ggml-quantised" : "");
      }
    }
  }
}

// IQ4_NL matrices whose row count is not a multiple of 8 (llama.cpp does not repack them) through
// ggml's own matrix product (ggml_mul_mat, computed by the CPU library's graph code, as llama.cpp
// runs a dense product): with 2 or more activation rows ggml hands it to tinyBLAS_Q0_AVX, whose
// bits are the gemm twin's (one set of 8 lanes; the engine's dense order, on every path), with
// one row to ggml_vec_dot_iq4_nl_q8_0 (the pairs of blocks; the engine's expert order).
TEST(GgmlLegacyQuant, IQ4NLGemmTwinIsGgmlTinyBlas) {
  REQUIRE_LGGML();
  constexpr int kTypeIQ4_NL = 20;  // enum ggml_type
  std::mt19937 rng(23);
  for (int trial = 0; trial < 6; ++trial) {
    int64_t rows = 1 + rng() % 23;
    if (rows % 8 == 0) ++rows;
    const int64_t cols = 32 * (1 + rng() % 13), nb = cols / 32;
    const int64_t n_act = trial == 0 ? 1 : 2 + rng() % 9;
    const size_t rb = dtype_row_bytes(DType::IQ4_NL, cols);
    const std::vector<float> xw = block_values(rows * cols, 300 + trial), xa = block_values(n_act * cols, 400 + trial);
    for (bool ggml_quantised : {false, true}) {
      const std::vector<uint8_t> w = quantise_rows(DType::IQ4_NL, xw.data(), rows, cols, ggml_quantised ? lg().types[3].quant : nullptr);
      const auto got = testing::ggml_mul_mat(kTypeIQ4_NL, w.data(), w.size(), rows, cols, xa.data(), n_act);
      if (!got) GTEST_SKIP() << "ggml's graph API is not exported";
      ASSERT_FALSE(got->empty()) << "ggml_graph_compute_with_ctx failed";
      const std::vector<float>& want = *got;
      const MatRef m{DType::IQ4_NL, w.data(), rows, cols, rb};
      ActRows a;
      a.convert(xa.data(), n_act, cols, cols, DType::Q8_0);
      EXPECT_EQ(sum_order(DType::IQ4_NL, rows, cols), SumOrder::Gemm);
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
        isa_force(isa);
        std::vector<float> y(n_act * rows), yv(n_act * rows);
        const int64_t split = rng() % (rows + 1);
        matmul(m, a, y.data(), rows, 0, split, SumOrder::Gemm);
        matmul(m, a, y.data(), rows, split, rows, SumOrder::Gemm);
        matmul(m, a, yv.data(), rows, 0, rows, SumOrder::VecDot);
        isa_force(isa_best());
        for (int64_t r = 0; r < n_act; ++r)
          for (int64_t o = 0; o < rows; ++o) {
            const auto* wr = reinterpret_cast<const BlockIQ4_NL*>(w.data() + o * rb);
            const auto* ar = static_cast<const BlockQ8_0*>(a.row(r));
            const float gemm = detail::iq4_nl_dot_gemm_ref(wr, ar, nb), pairs = detail::iq4_nl_dot_lanes8_ref(wr, ar, nb);
            EXPECT_EQ(y[r * rows + o], gemm) << isa_name(isa) << " act " << r << " row " << o;
            EXPECT_EQ(yv[r * rows + o], pairs) << isa_name(isa) << " act " << r << " row " << o;
            EXPECT_EQ(n_act >= 2 ? gemm : pairs, want[r * rows + o])
                << (n_act >= 2 ? "tinyBLAS" : "vec_dot") << ", act " << r << " row " << o << " of " << rows << " x " << cols
                << (ggml_quantised ? " ggml-quantised" : "");
          }
      }
    }
  }
}

}  // namespace
}  // namespace clover::kernels
