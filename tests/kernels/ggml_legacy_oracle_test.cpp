// Q4_1, Q5_0, Q5_1 against the prebuilt ggml (ggml_lib.h): the Q8_1 activation quantiser, the
// dequantisers, the quality of this project's quantiser next to ggml's reference one, and the dot
// products of the twins and of every SIMD path (ggml_vec_dot_q4_1_q8_1, _q5_0_q8_0, _q5_1_q8_1)
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
  const struct { DType t; double bound; } bounds[] = {{DType::Q4_1, 0.075}, {DType::Q5_0, 0.043}, {DType::Q5_1, 0.036}};
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
    const int64_t rows = 1 + rng() % 23, cols = 32 * (1 + rng() % 37), n_act = 1 + rng() % 7;
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
        std::vector<float> want(n_act * rows);
        for (int64_t r = 0; r < n_act; ++r)
          for (int64_t o = 0; o < rows; ++o) {
            p.dot(static_cast<int>(cols), &want[r * rows + o], 0, w.data() + o * rb, 0, a.row(r), 0, 1);
            EXPECT_EQ(detail::legacy_dot_ref(p.t, w.data() + o * rb, a.row(r), cols), want[r * rows + o])
                << dtype_name(p.t) << " twin row " << o;
          }
        const int64_t split = rng() % (rows + 1);
        for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
          if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
          isa_force(isa);
          std::vector<float> y(n_act * rows), ys(sel.size() * rows);
          matmul(m, a, y.data(), rows, 0, split);
          matmul(m, a, y.data(), rows, split, rows, SumOrder::VecDot);
          matmul_selected(m, a, sel.data(), static_cast<int64_t>(sel.size()), ys.data(), rows, 0, rows);
          isa_force(isa_best());
          for (int64_t r = 0; r < n_act; ++r)
            for (int64_t o = 0; o < rows; ++o)
              EXPECT_EQ(y[r * rows + o], want[r * rows + o]) << dtype_name(p.t) << " " << isa_name(isa) << " row " << o
                                                             << (ggml_quantised ? " ggml-quantised" : "");
          for (size_t i = 0; i < sel.size(); ++i)
            for (int64_t o = 0; o < rows; ++o)
              EXPECT_EQ(ys[i * rows + o], want[sel[i] * rows + o]) << dtype_name(p.t) << " " << isa_name(isa) << " selected";
        }
      }
    }
  }
}

}  // namespace
}  // namespace clover::kernels
