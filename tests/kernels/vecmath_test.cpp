// Element-wise math (kernels/vecmath.h): every ISA path bit for bit against the scalar twins,
// over spans that start and end inside 16-value chunks, and the twins against the formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/vecmath.h"

using namespace clover::kernels;

namespace {

std::vector<float> values(int64_t n, uint32_t seed, float sd = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(rng);
  return x;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (static_cast<int>(isa) <= static_cast<int>(isa_best())) v.push_back(isa);
  return v;
}

TEST(VecMath, ExpLaneIsExpWithinTwoUlp) {
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(exp_lane(x), want, 2.5e-7 * want) << x;
  }
  EXPECT_EQ(exp_lane(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(exp_lane(200.0f)));
}

TEST(VecMath, SpansMatchTheTwinsOnEveryIsa) {
  const int64_t n = 77;  // 4 whole chunks and a tail
  const std::vector<float> x = values(n, 1), g = values(n, 2);
  for (Isa isa : isas()) {
    isa_force(isa);
    for (int64_t b : {0, 3, 16, 20}) {
      for (int64_t e : {int64_t{5}, int64_t{33}, int64_t{64}, n}) {
        if (e <= b) continue;
        std::vector<float> y(n, 7.0f), yr(n, 7.0f);
        silu_span(y.data(), x.data(), n, b, e);
        silu_span_ref(yr.data(), x.data(), n, b, e);
        EXPECT_TRUE(same_bits(y, yr)) << "silu " << isa_name(isa) << " [" << b << ", " << e << ")";
        y = x, yr = x;
        swiglu_span(y.data(), g.data(), n, b, e);
        swiglu_span_ref(yr.data(), g.data(), n, b, e);
        EXPECT_TRUE(same_bits(y, yr)) << "swiglu " << isa_name(isa) << " [" << b << ", " << e << ")";
      }
    }
    std::vector<float> y(n), yr(n);
    EXPECT_EQ(softmax_exp_row(y.data(), x.data(), n, 1.5f), softmax_exp_row_ref(yr.data(), x.data(), n, 1.5f));
    EXPECT_TRUE(same_bits(y, yr)) << "softmax terms " << isa_name(isa);
  }
  isa_force(isa_best());
}

TEST(VecMath, SiluAndSoftmaxFollowTheirFormulas) {
  const int64_t n = 50;
  const std::vector<float> x = values(n, 3);
  std::vector<float> y(n);
  silu_row(y.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] / (1.0 + std::exp(-double(x[i]))), 1e-6 * (1 + std::fabs(x[i])));
  const double sum = softmax_exp_row(y.data(), x.data(), n, 2.0f);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) want += std::exp(double(x[i]) - 2.0);
  EXPECT_NEAR(sum, want, 1e-6 * want);
}

// The causal conv + silu: every ISA against the twin (channel ranges cut inside chunks, a tail of
// channels past the last chunk), and the twin, given the weights made tap-major, against the
// formula over the file's layout.
TEST(VecMath, ConvSiluMatchesTheTwinAndTheFormula) {
  const int K = 4;
  const int64_t C = 100, T = 6;
  const std::vector<float> in = values(C * (T + K - 1), 4, 1.0f), w = values(C * K, 5, 0.5f);  // the file's [C][K]
  std::vector<float> w_taps(w.size());
  conv_taps_major(w.data(), K, C, w_taps.data());  // the kernels' [K][C]
  for (Isa isa : isas()) {
    isa_force(isa);
    for (int64_t t = 0; t < T; ++t) {
      const float* taps[K];
      for (int j = 0; j < K; ++j) taps[j] = in.data() + (t + j) * C;
      std::vector<float> y(C, 9.0f), yr(C, 9.0f);
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, C}, {5, 37}, {64, 99}}) {
        conv_silu(taps, K, w_taps.data(), C, b, e, y.data());
        conv_silu_ref(taps, K, w_taps.data(), C, b, e, yr.data());
      }
      EXPECT_TRUE(same_bits(y, yr)) << isa_name(isa) << " t " << t;
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0;
        for (int j = 0; j < K; ++j) acc += double(taps[j][c]) * w[c * K + j];
        EXPECT_NEAR(yr[c], acc / (1 + std::exp(-acc)), 1e-5 * (1 + std::fabs(acc))) << c;
      }
    }
  }
  isa_force(isa_best());
}

}  // namespace
