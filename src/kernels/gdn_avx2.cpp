// AVX2 + FMA gated delta rule steps in ggml-cpu's operation order (gdn.h): each 16-lane
// accumulator of the AVX-512 path is a pair of 8-lane halves, so the bits equal gdn_step_ref's.
#include <immintrin.h>

#include <cmath>

#include "kernels/gdn_internal.h"

namespace clover::kernels::detail {
namespace {

struct Acc16 {  // lanes 0..7 and 8..15 of one 16-lane accumulator
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  void fma(const float* x, const float* y) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8), _mm256_loadu_ps(y + 8), hi);
  }
};

// The row operations of this instruction set, for gdn_rows (gdn_internal.h).
struct Avx2Ops {
  // ggml_vec_dot_f32 (AVX-512 build) order: see gdn_avx512.cpp.
  static float dot(const float* x, const float* y, int64_t n) {
    const int64_t np = n & ~int64_t{63};
    Acc16 a0, a1, a2, a3;
    for (int64_t i = 0; i < np; i += 64) {
      a0.fma(x + i, y + i);
      a1.fma(x + i + 16, y + i + 16);
      a2.fma(x + i + 32, y + i + 32);
      a3.fma(x + i + 48, y + i + 48);
    }
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(a0.lo, a2.lo), _mm256_add_ps(a1.lo, a3.lo));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(a0.hi, a2.hi), _mm256_add_ps(a1.hi, a3.hi));
    const __m256 h = _mm256_add_ps(lo, hi);  // lane l + lane l + 8
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    float s = _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
    return dot_tail(x, y, np, n, s);
  }

  static void scale_row(float* row, float decay, int64_t d) {
    const __m256 m = _mm256_set1_ps(decay);
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), m));
    for (; i < d; ++i) row[i] = row[i] * decay;
  }

  static void mad_row(float* row, const float* kv, float delta, int64_t d) {  // row += kv * delta, fused
    const __m256 m = _mm256_set1_ps(delta);
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) _mm256_storeu_ps(row + i, _mm256_fmadd_ps(_mm256_loadu_ps(kv + i), m, _mm256_loadu_ps(row + i)));
    for (; i < d; ++i) row[i] = std::fma(kv[i], delta, row[i]);
  }
};

}  // namespace

void gdn_step_avx2(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                   int64_t d, float* o) {
  gdn_rows<Avx2Ops, false>(S, q, k, v, decay, beta, scale, d, o);
}

void gdn_step_reverse_avx2(float* R, const float* q, const float* k, const float* v, float decay, float beta,
                           float scale, int64_t d, float* o) {
  gdn_rows<Avx2Ops, true>(R, q, k, v, decay, beta, scale, d, o);
}

}  // namespace clover::kernels::detail
