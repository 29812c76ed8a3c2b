// Per-ISA entry points of the gated delta rule steps (gdn.h); compiled with their own flags.
#pragma once
#include <cstdint>

namespace clover::kernels::detail {

void gdn_step_avx512(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                     int64_t d, float* o);
void gdn_step_reverse_avx512(float* R, const float* q, const float* k, const float* v, float decay, float beta,
                             float scale, int64_t d, float* o);

void gdn_step_avx2(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                   int64_t d, float* o);
void gdn_step_reverse_avx2(float* R, const float* q, const float* k, const float* v, float decay, float beta,
                           float scale, int64_t d, float* o);

}  // namespace clover::kernels::detail
