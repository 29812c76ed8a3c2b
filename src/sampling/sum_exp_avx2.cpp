// AVX2 + FMA twin of sum_exp_reference: four doubles at a time, exp by Cody-Waite range reduction
// (x = k ln2 + r, |r| <= ln2/2) and a degree-13 Taylor polynomial (truncation error < 1e-17
// relative), then scaling by 2^k through the exponent bits. Within ~2 ulp of std::exp per term.
#include <immintrin.h>

#include <cmath>

#include "sampling/sum_exp.h"

namespace clover::sampling::detail {
namespace {

// exp(d) for d in [-708, 709]; lanes outside give garbage and are masked by the caller.
inline __m256d exp_pd(__m256d d) {
  const __m256d log2e = _mm256_set1_pd(1.4426950408889634074);
  const __m256d ln2_hi = _mm256_set1_pd(6.93147180369123816490e-01);  // 32 significant bits
  const __m256d ln2_lo = _mm256_set1_pd(1.90821492927058770002e-10);
  const __m256d k = _mm256_round_pd(_mm256_mul_pd(d, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(k, ln2_hi, d);  // exact: k * ln2_hi has <= 43 significant bits
  r = _mm256_fnmadd_pd(k, ln2_lo, r);
  // 1 + r + r^2/2! + ... + r^13/13!, Horner form.
  static constexpr double kInvFactorial[] = {
      1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
      1.0 / 40320.0,      1.0 / 5040.0,      1.0 / 720.0,       1.0 / 120.0,     1.0 / 24.0,
      1.0 / 6.0,          1.0 / 2.0,         1.0,               1.0};
  __m256d p = _mm256_set1_pd(kInvFactorial[0]);
  for (int i = 1; i < 14; ++i) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kInvFactorial[i]));
  // 2^k: k in [-1022, 1023] for d in [-708, 709], so k + 1023 is a normal exponent field.
  const __m128i k32 = _mm256_cvtpd_epi32(k);
  const __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k32), _mm256_set1_epi64x(1023)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
}

inline __m256d masked_terms(const float* x, __m256d shift) {
  const __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x)), shift);
  const __m256d in_range = _mm256_cmp_pd(d, _mm256_set1_pd(-708.0), _CMP_GE_OQ);  // false for NaN, -inf
  const __m256d clamped = _mm256_min_pd(_mm256_max_pd(d, _mm256_set1_pd(-708.0)), _mm256_set1_pd(709.0));
  return _mm256_and_pd(exp_pd(clamped), in_range);
}

}  // namespace

double sum_exp_avx2(const float* x, size_t n, double shift_value) {
  const __m256d shift = _mm256_set1_pd(shift_value);
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd(), acc2 = _mm256_setzero_pd(),
          acc3 = _mm256_setzero_pd();
  size_t i = 0;
  // Four independent chains: the polynomial is 13 dependent FMAs, so one chain would be latency-bound.
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_add_pd(acc0, masked_terms(x + i, shift));
    acc1 = _mm256_add_pd(acc1, masked_terms(x + i + 4, shift));
    acc2 = _mm256_add_pd(acc2, masked_terms(x + i + 8, shift));
    acc3 = _mm256_add_pd(acc3, masked_terms(x + i + 12, shift));
  }
  for (; i + 4 <= n; i += 4) acc0 = _mm256_add_pd(acc0, masked_terms(x + i, shift));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(_mm256_add_pd(acc0, acc1), _mm256_add_pd(acc2, acc3)));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - shift_value;
    if (d >= -708.0) sum += std::exp(d);
  }
  return sum;
}

}  // namespace clover::sampling::detail
