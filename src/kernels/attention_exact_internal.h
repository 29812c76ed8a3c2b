// The exact (F32 cache) attention of attention.h: shared pieces of the scalar twin
// (attention_exact.cpp) and the AVX-512 path (attention_exact_avx512.cpp).
#pragma once
#include <cstdint>

#include "kernels/attention.h"

namespace clover::kernels::detail {

// Pass 1 of a row: s[j] = (k_j . q) * scale for j < n, each dot as ggml_vec_dot_f32 sums it
// (llama.cpp's kq product reads the permuted, non-contiguous queries, which tinyBLAS declines).
void exact_scores_ref(const float* q, const KvHeadRef& k, int64_t n, int hd, float scale, float* s);
void exact_scores_avx512(const float* q, const KvHeadRef& k, int64_t n, int hd, float scale, float* s);

// Pass 3: o[d] = sum_j p[j] v_j[d] as tinyBLAS sums kqv: lane l of dim d's accumulator takes the
// keys j = l mod 16 in order (lanes: [16][hd] floats of scratch), then the 16-lane tree.
void exact_values_ref(const float* p, const KvHeadRef& v, int64_t n, int hd, float* lanes, float* o);
void exact_values_avx512(const float* p, const KvHeadRef& v, int64_t n, int hd, float* lanes, float* o);

}  // namespace clover::kernels::detail
