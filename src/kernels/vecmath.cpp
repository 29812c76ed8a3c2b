// Element-wise math in ggml-cpu's numerics: the scalar twins (vecmath_lanes.inc, compiled for
// baseline x86-64) and the run-time choice of the AVX-512 path (vecmath_avx512.cpp) or the twins
// compiled with FMA (vecmath_avx2.cpp). The bits are the same on every path.
#include "kernels/vecmath.h"

#include "kernels/matmul.h"
#include "kernels/vecmath_internal.h"

#define CLOVER_VECMATH_ISA baseline
#include "kernels/vecmath_lanes.inc"
#undef CLOVER_VECMATH_ISA

namespace clover::kernels {

float exp_lane(float x) { return baseline::exp_lane(x); }
float detail::silu_at(float x, int64_t i, int64_t n) { return baseline::silu_at(x, i, n); }

void silu_span_ref(float* y, const float* x, int64_t n, int64_t b, int64_t e) { baseline::silu_span(y, x, n, b, e); }
void swiglu_span_ref(float* g, const float* u, int64_t n, int64_t b, int64_t e) { baseline::swiglu_span(g, u, n, b, e); }
double softmax_exp_row_ref(float* y, const float* x, int64_t n, float max) { return baseline::softmax_exp_row(y, x, n, max); }
void conv_silu_ref(const float* const* taps, int K, const float* w, int64_t C, int64_t c_begin, int64_t c_end, float* y) {
  baseline::conv_silu(taps, K, w, C, c_begin, c_end, y);
}

void silu_span(float* y, const float* x, int64_t n, int64_t b, int64_t e) {
  switch (isa_active()) {
    case Isa::Avx512: return detail::silu_span_avx512(y, x, n, b, e);
    case Isa::Avx2: return avx2::silu_span(y, x, n, b, e);
    default: return baseline::silu_span(y, x, n, b, e);
  }
}

void swiglu_span(float* g, const float* u, int64_t n, int64_t b, int64_t e) {
  switch (isa_active()) {
    case Isa::Avx512: return detail::swiglu_span_avx512(g, u, n, b, e);
    case Isa::Avx2: return avx2::swiglu_span(g, u, n, b, e);
    default: return baseline::swiglu_span(g, u, n, b, e);
  }
}

double softmax_exp_row(float* y, const float* x, int64_t n, float max) {
  switch (isa_active()) {
    case Isa::Avx512: return detail::softmax_exp_row_avx512(y, x, n, max);
    case Isa::Avx2: return avx2::softmax_exp_row(y, x, n, max);
    default: return baseline::softmax_exp_row(y, x, n, max);
  }
}

void conv_taps_major(const float* w, int K, int64_t C, float* w_taps) {
  for (int64_t c = 0; c < C; ++c)
    for (int j = 0; j < K; ++j) w_taps[j * C + c] = w[c * K + j];
}

void conv_silu(const float* const* taps, int K, const float* w, int64_t C, int64_t c_begin, int64_t c_end, float* y) {
  switch (isa_active()) {
    case Isa::Avx512: return detail::conv_silu_avx512(taps, K, w, C, c_begin, c_end, y);
    case Isa::Avx2: return avx2::conv_silu(taps, K, w, C, c_begin, c_end, y);
    default: return baseline::conv_silu(taps, K, w, C, c_begin, c_end, y);
  }
}

}  // namespace clover::kernels
