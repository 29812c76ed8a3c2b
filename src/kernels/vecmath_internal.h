// Per-ISA entry points of the element-wise math (vecmath.h) and the scalar lane functions they
// share with the reference twins.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/vecmath.h"

namespace clover::kernels::detail {

// Values below this index of a row of n go through the polynomial, the rest through expf.
inline int64_t poly_end(int64_t n) { return n & ~int64_t{15}; }

inline float silu_lane(float x) { return x / (1.0f + exp_lane(0.0f - x)); }
inline float silu_tail(float x) { return x / (1.0f + std::exp(-x)); }
inline float silu_at(float x, int64_t i, int64_t n) { return i < poly_end(n) ? silu_lane(x) : silu_tail(x); }

// The 16-lane reduction tree: lanes l + 8, then + 4, + 2, + 1.
inline float reduce16(const float* a) {
  float h[8], q[4];
  for (int i = 0; i < 8; ++i) h[i] = a[i] + a[i + 8];
  for (int i = 0; i < 4; ++i) q[i] = h[i] + h[i + 4];
  return (q[0] + q[2]) + (q[1] + q[3]);
}

void silu_span_avx512(float* y, const float* x, int64_t n, int64_t b, int64_t e);
void swiglu_span_avx512(float* g, const float* u, int64_t n, int64_t b, int64_t e);
double softmax_exp_row_avx512(float* y, const float* x, int64_t n, float max);
void conv_silu_avx512(const float* const* taps, int K, const float* w, int64_t C, int64_t c_begin, int64_t c_end,
                      float* y);

}  // namespace clover::kernels::detail
