// Small element-wise and per-row operations of the forward pass. Plain loops; the heavy lifting
// (matmuls, exp-based activations over rows) lives in kernels/. Numerics follow ggml-cpu where
// that matters for matching llama.cpp: sums of squares are float products added in double, the
// GDN L2 norm is ggml's rms_norm(x, eps / n) * (1 / sqrt(n)), softplus is log(1 + exp(x)), rope
// angles are repeated products and its rotation fuses one product of each output.
#pragma once
#include <cmath>
#include <cstdint>

namespace clover::model::ops {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// Sum of squares as ggml-cpu's norms add it: each square rounded to float, the sum in double.
inline double sum_squares(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null: no weight). In place allowed.
inline void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  const float mean = static_cast<float>(sum_squares(x, n) / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  else
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

// x / sqrt(sum(x^2) + eps), in place (GDN q/k normalisation), computed as llama.cpp builds it:
// rms_norm with eps / n, then a product with 1 / sqrt(n).
inline void l2_norm(float* x, int64_t n, float eps) {
  const float fn = static_cast<float>(n);
  rms_norm(x, nullptr, x, n, eps / fn);
  const float inv_sqrt_n = 1.0f / std::sqrt(fn);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv_sqrt_n;
}

// NEOX rotary embedding of the first n_rot dims of one head at position pos: pairs (i, i + n_rot/2).
// The angle of pair i is pos * theta_scale^i, accumulated by repeated float products exactly as
// ggml's rope cache does, so that positions far into a long context round the same way.
inline void rope_neox(float* x, int n_rot, int64_t pos, float freq_base) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const float c = std::cos(theta), s = std::sin(theta);
    const float x0 = x[i], x1 = x[i + half];
    x[i] = std::fma(x0, c, -(x1 * s));  // the products fused as GCC contracts ggml's rotation
    x[i + half] = std::fma(x0, s, x1 * c);
    theta *= theta_scale;
  }
}

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace clover::model::ops
