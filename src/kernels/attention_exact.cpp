// Exact attention for F32 caches (attention.h): llama.cpp's non-flash attention with an F32 KV
// cache, step for step: the scores, the softmax, and the scalar twin of the value pass.
#include <algorithm>
#include <cmath>

#include "kernels/attention_exact_internal.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/vecmath.h"
#include "kernels/vecmath_internal.h"

namespace clover::kernels {

namespace detail {

void exact_values_ref(const float* p, const KvHeadRef& v, int64_t n, int hd, float* lanes, float* o) {
  std::fill(lanes, lanes + 16 * hd, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const auto* vr = reinterpret_cast<const float*>(v.data + j * v.row_stride);
    float* a = lanes + (j & 15) * hd;
    for (int d = 0; d < hd; ++d) a[d] = std::fma(vr[d], p[j], a[d]);
  }
  for (int d = 0; d < hd; ++d) {
    float col[16];
    for (int l = 0; l < 16; ++l) col[l] = lanes[l * hd + d];
    o[d] = reduce16(col);
  }
}

}  // namespace detail

bool attention_exact_fits(const KvHeadRef& k, const KvHeadRef& v, int head_dim) {
  return k.type == DType::F32 && v.type == DType::F32 && head_dim % 16 == 0;
}

void attention_exact(const AttentionRows& rows, int hd, float scale, const KvHeadRef& k, const KvHeadRef& v,
                     AttentionScratch& scratch) {
  const bool simd = isa_active() == Isa::Avx512;
  scratch.lanes.resize(static_cast<size_t>(16) * hd);
  for (int r = 0; r < rows.n; ++r) {
    const int64_t n = rows.n_keys[r];
    float* o = rows.o[r];
    if (n == 0) {
      std::fill(o, o + hd, 0.0f);
      continue;
    }
    // Scores, padded with -inf to whole 16-value chunks (llama.cpp's masked tail: their exp is 0).
    const int64_t n16 = (n + 15) / 16 * 16;
    if (scratch.scores.size() < static_cast<size_t>(n16)) scratch.scores.resize(static_cast<size_t>(n16));
    float* s = scratch.scores.data();
    // Scores: each dot as ggml_vec_dot_f32 sums it (llama.cpp's kq product reads the permuted,
    // non-contiguous queries, which tinyBLAS declines).
    const auto dot = simd ? detail::vec_dot_f32_avx512 : detail::vec_dot_f32_ref;
    for (int64_t j = 0; j < n; ++j) s[j] = dot(reinterpret_cast<const float*>(k.data + j * k.row_stride), rows.q[r], hd) * scale;
    std::fill(s + n, s + n16, -INFINITY);
    const float mx = *std::max_element(s, s + n);
    const float inv_sum = static_cast<float>(1.0 / softmax_exp_row(s, s, n16, mx));
    for (int64_t j = 0; j < n; ++j) s[j] *= inv_sum;
    if (simd)
      detail::exact_values_avx512(s, v, n, hd, scratch.lanes.data(), o);
    else
      detail::exact_values_ref(s, v, n, hd, scratch.lanes.data(), o);
  }
}

}  // namespace clover::kernels
