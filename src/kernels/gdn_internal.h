// Per-ISA entry points of the gated delta rule steps (gdn.h); compiled with their own flags.
#pragma once
#include <cstdint>

#include "kernels/matmul_internal.h"  // dot_tail

namespace clover::kernels::detail {

// The row loop of one step, forward or reverse (gdn.h), over an instruction set's `Ops` (static
// dot, scale_row and mad_row in ggml's order). Instantiated in each ISA's own file, so it is
// compiled with that file's flags.
template <class Ops, bool Reverse>
inline void gdn_rows(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                     int64_t d, float* o) {
  for (int64_t j = 0; j < d; ++j) {
    float* row = S + j * d;
    if constexpr (Reverse) o[j] += Ops::dot(row, q, d) * scale;
    Ops::scale_row(row, decay, d);
    Ops::mad_row(row, k, (v[j] - Ops::dot(row, k, d)) * beta, d);
    if constexpr (!Reverse) o[j] = Ops::dot(row, q, d) * scale;
  }
}

void gdn_step_avx512(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                     int64_t d, float* o);
void gdn_step_reverse_avx512(float* R, const float* q, const float* k, const float* v, float decay, float beta,
                             float scale, int64_t d, float* o);

void gdn_step_avx2(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                   int64_t d, float* o);
void gdn_step_reverse_avx2(float* R, const float* q, const float* k, const float* v, float decay, float beta,
                           float scale, int64_t d, float* o);

}  // namespace clover::kernels::detail
