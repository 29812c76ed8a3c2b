// sum_exp's AVX2 path against its plain reference twin (std::exp per term), on random rows of odd
// sizes, with NaN / -inf entries and terms down to the underflow cut.
#include "sampling/sum_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace clover::sampling {
namespace {

std::vector<float> random_row(size_t n, float spread, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> x(n);
  for (float& v : x) v = normal(gen);
  return x;
}

TEST(SumExp, Avx2MatchesReferenceOnOddSizes) {
  if (!detail::sum_exp_avx2_available()) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  for (size_t n : {0, 1, 3, 4, 5, 7, 15, 16, 17, 31, 33, 1000, 248320}) {
    for (float spread : {0.5f, 3.0f, 200.0f}) {
      std::vector<float> x = random_row(n, spread, n * 31 + size_t(spread));
      float m = -std::numeric_limits<float>::infinity();
      for (float v : x) m = std::max(m, v);
      const double shift = n ? m : 0.0;
      const double ref = sum_exp_reference(x.data(), n, shift);
      const double simd = detail::sum_exp_avx2(x.data(), n, shift);
      // The sums are taken in different orders: over 250k terms that alone moves the last ~3 digits.
      EXPECT_NEAR(simd, ref, 1e-12 * ref) << "n " << n << " spread " << spread;
      EXPECT_EQ(sum_exp(x.data(), n, shift), simd);  // the dispatcher picks the AVX2 path
    }
  }
}

TEST(SumExp, EachTermIsWithinAFewUlpOfStdExp) {
  if (!detail::sum_exp_avx2_available()) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> uniform(-708.0, 0.0);
  double worst = 0.0;
  for (int i = 0; i < 20000; ++i) {
    const float v = float(uniform(gen));
    const double want = std::exp(double(v));
    // Four copies: the vector loop computes them, not the scalar tail.
    const float row[4] = {v, v, v, v};
    const double got = detail::sum_exp_avx2(row, 4, 0.0) / 4.0;
    worst = std::max(worst, std::abs(got - want) / want);
  }
  EXPECT_LT(worst, 4e-16);
}

TEST(SumExp, SkipsNaNMinusInfAndUnderflow) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, nan, -inf, -1.0f, -800.0f, nan, -inf, -2.0f, 0.0f};
  const double want = 2.0 + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_NEAR(sum_exp_reference(x.data(), x.size(), 0.0), want, 1e-15);
  if (detail::sum_exp_avx2_available()) {
    EXPECT_NEAR(detail::sum_exp_avx2(x.data(), x.size(), 0.0), want, 1e-15);
  }
}

}  // namespace
}  // namespace clover::sampling
