// The exact (F32 cache) attention of attention.h: the value pass's scalar twin
// (attention_exact.cpp) and AVX-512 path (attention_exact_avx512.cpp). The scores use
// vec_dot_f32_ref / vec_dot_f32_avx512 (matmul_internal.h).
#pragma once
#include <cstdint>

#include "kernels/attention.h"

namespace clover::kernels::detail {

// The value pass: o[d] = sum_j p[j] v_j[d] as tinyBLAS sums kqv: lane l of dim d's accumulator takes the
// keys j = l mod 16 in order (lanes: [16][hd] floats of scratch), then the 16-lane tree.
void exact_values_ref(const float* p, const KvHeadRef& v, int64_t n, int hd, float* lanes, float* o);
void exact_values_avx512(const float* p, const KvHeadRef& v, int64_t n, int hd, float* lanes, float* o);

}  // namespace clover::kernels::detail
