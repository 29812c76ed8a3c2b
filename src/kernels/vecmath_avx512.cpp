// AVX-512 element-wise math (vecmath.h): 16 lanes of the scalar twins' operations, so the bits
// equal vecmath.cpp's. Values outside whole aligned chunks of the polynomial region go through the
// twins' lane functions.
#include <immintrin.h>

#include <cmath>

#include "kernels/vecmath_internal.h"

namespace clover::kernels::detail {
namespace {

inline __m512 exp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift), shift);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 hi = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                                    _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f)));
  const __m512 p = _mm512_fmadd_ps(hi, u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 r = _mm512_scalef_ps(p, n);
  const __mmask16 out_of_range = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (!out_of_range) return r;
  const __m512 zero = _mm512_setzero_ps();
  const __m512 limit = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ), _mm512_set1_ps(INFINITY), zero);
  return _mm512_mask_blend_ps(out_of_range, r, limit);
}

inline __m512 silu16(__m512 x) {
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// Walks [b, e): whole aligned chunks inside the polynomial region go to `chunk`, the rest to `one`.
template <class Chunk, class One>
inline void walk(int64_t n, int64_t b, int64_t e, Chunk chunk, One one) {
  const int64_t np = poly_end(n);
  int64_t i = b;
  while (i < e) {
    if ((i & 15) == 0 && i + 16 <= np && i + 16 <= e) {
      chunk(i);
      i += 16;
    } else {
      one(i);
      ++i;
    }
  }
}

}  // namespace

void silu_span_avx512(float* y, const float* x, int64_t n, int64_t b, int64_t e) {
  walk(n, b, e, [&](int64_t i) { _mm512_storeu_ps(y + i, silu16(_mm512_loadu_ps(x + i))); },
       [&](int64_t i) { y[i] = silu_at(x[i], i, n); });
}

void swiglu_span_avx512(float* g, const float* u, int64_t n, int64_t b, int64_t e) {
  walk(n, b, e, [&](int64_t i) { _mm512_storeu_ps(g + i, _mm512_mul_ps(silu16(_mm512_loadu_ps(g + i)), _mm512_loadu_ps(u + i))); },
       [&](int64_t i) { g[i] = silu_at(g[i], i, n) * u[i]; });
}

double softmax_exp_row_avx512(float* y, const float* x, int64_t n, float max) {
  double sum = 0.0;
  const int64_t np = poly_end(n);
  const __m512 m = _mm512_set1_ps(max);
  for (int64_t i = 0; i < np; i += 16) {
    const __m512 v = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    _mm512_storeu_ps(y + i, v);
    sum += static_cast<double>(_mm512_reduce_add_ps(v));
  }
  for (int64_t i = np; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  return sum;
}

void conv_silu_avx512(const float* const* taps, int K, const float* w, int64_t C, int64_t c_begin, int64_t c_end, float* y) {
  walk(C, c_begin, c_end,
       [&](int64_t c) {
         __m512 acc = _mm512_setzero_ps();
         for (int j = 0; j < K; ++j) acc = _mm512_fmadd_ps(_mm512_loadu_ps(taps[j] + c), _mm512_loadu_ps(w + j * C + c), acc);
         _mm512_storeu_ps(y + c, silu16(acc));
       },
       [&](int64_t c) {
         float acc = 0.0f;
         for (int j = 0; j < K; ++j) acc = std::fma(taps[j][c], w[j * C + c], acc);
         y[c] = silu_at(acc, c, C);
       });
}

}  // namespace clover::kernels::detail
