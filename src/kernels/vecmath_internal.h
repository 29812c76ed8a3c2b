// Per-ISA entry points of the element-wise math (vecmath.h) and the helpers they share with the
// reference twins (vecmath_lanes.inc).
#pragma once
#include <cstdint>

#include "kernels/vecmath.h"

namespace clover::kernels::detail {

// Values below this index of a row of n go through the polynomial, the rest through expf.
inline int64_t poly_end(int64_t n) { return n & ~int64_t{15}; }

// silu of value i of a row of n, as the twins compute it (the polynomial or expf by index).
float silu_at(float x, int64_t i, int64_t n);

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

// The lane code of vecmath_lanes.inc, one copy per instruction set.
namespace clover::kernels::avx2 {
void silu_span(float* y, const float* x, int64_t n, int64_t b, int64_t e);
void swiglu_span(float* g, const float* u, int64_t n, int64_t b, int64_t e);
double softmax_exp_row(float* y, const float* x, int64_t n, float max);
void conv_silu(const float* const* taps, int K, const float* w, int64_t C, int64_t c_begin, int64_t c_end, float* y);
}  // namespace clover::kernels::avx2
