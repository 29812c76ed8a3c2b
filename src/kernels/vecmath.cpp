// Element-wise math in ggml-cpu's numerics: the scalar twins and the run-time choice of the
// AVX-512 path (vecmath_avx512.cpp). Other CPUs run the twins: the bits are the same everywhere.
#include "kernels/vecmath.h"

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/vecmath_internal.h"

namespace clover::kernels {

using detail::poly_end;

float exp_lane(float x) {
  constexpr float kShift = 0x1.8p23f;  // adding it rounds x / ln 2 to an integer
  const float z = std::fma(x, 0x1.715476p+0f, kShift);
  const float n = z - kShift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));  // x - n ln 2, in two parts
  if (std::isnan(n)) return n;
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  return std::ldexp(j, static_cast<int>(n));
}

void silu_span_ref(float* y, const float* x, int64_t n, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = detail::silu_at(x[i], i, n);
}

void swiglu_span_ref(float* g, const float* u, int64_t n, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) g[i] = detail::silu_at(g[i], i, n) * u[i];
}

double softmax_exp_row_ref(float* y, const float* x, int64_t n, float max) {
  double sum = 0.0;
  const int64_t np = poly_end(n);
  for (int64_t i = 0; i < np; i += 16) {
    for (int l = 0; l < 16; ++l) y[i + l] = exp_lane(x[i + l] - max);
    sum += static_cast<double>(detail::reduce16(y + i));
  }
  for (int64_t i = np; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  return sum;
}

void conv_silu_ref(const float* const* taps, int K, const float* w, int64_t C, int64_t c_begin, int64_t c_end, float* y) {
  for (int64_t c = c_begin; c < c_end; ++c) {
    float acc = 0.0f;
    for (int j = 0; j < K; ++j) acc = std::fma(taps[j][c], w[c * K + j], acc);
    y[c] = detail::silu_at(acc, c, C);
  }
}

void silu_span(float* y, const float* x, int64_t n, int64_t b, int64_t e) {
  if (isa_active() == Isa::Avx512) return detail::silu_span_avx512(y, x, n, b, e);
  silu_span_ref(y, x, n, b, e);
}

void swiglu_span(float* g, const float* u, int64_t n, int64_t b, int64_t e) {
  if (isa_active() == Isa::Avx512) return detail::swiglu_span_avx512(g, u, n, b, e);
  swiglu_span_ref(g, u, n, b, e);
}

double softmax_exp_row(float* y, const float* x, int64_t n, float max) {
  if (isa_active() == Isa::Avx512) return detail::softmax_exp_row_avx512(y, x, n, max);
  return softmax_exp_row_ref(y, x, n, max);
}

void conv_silu(const float* const* taps, int K, const float* w, int64_t C, int64_t c_begin, int64_t c_end, float* y) {
  if (isa_active() == Isa::Avx512) return detail::conv_silu_avx512(taps, K, w, C, c_begin, c_end, y);
  conv_silu_ref(taps, K, w, C, c_begin, c_end, y);
}

}  // namespace clover::kernels
