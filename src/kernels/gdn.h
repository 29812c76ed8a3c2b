// One position of the gated delta rule (the recurrence of a Gated DeltaNet head), for the forward
// scan of causal passes and for the reverse in-block path of denoising passes (CLOVER-SPEC 3.3).
//
// State layout (model/state.h): S is [d][d] with S[j][i] = S_h[i][j], so row j (value dim j) is
// contiguous over the key dim i and every product below is a dot product of a row.
//
// Numerics follow ggml-cpu's GATED_DELTA_NET (llama.cpp's CPU op, AVX-512 build), so that AR
// logits stay close to llama.cpp's: a dot product is ggml_vec_dot_f32's, i.e. 4 x 16 lanes of
// fused multiply-adds over each 64 values, the 4 accumulators added (0 + 2, 1 + 3, then together),
// the 16 lanes added in a fixed tree (l + 8, then + 4, + 2, + 1), and a tail of fewer than 64
// values as GCC compiles it (groups of 8 rounded products added in order, then fused
// multiply-adds for the last n % 8: detail::dot_tail); the state update is ggml_vec_mad_f32's fused
// multiply-add per element, the decay a plain product. The scalar twin and the AVX-512 path follow
// exactly this order, so every ISA gives the same bits, and a position's result does not depend
// on how many positions are scanned in one call or on which thread runs the head.
#pragma once
#include <cstdint>

namespace clover::kernels {

// Forward step:  S = decay S;  per row j: delta = (v_j - S_j . k) beta;  S_j += delta k;
//                o_j = (S_j . q) scale.
void gdn_step(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale, int64_t d,
              float* o);

// Reverse step (the state R holds only later positions):  per row j:  o_j += (R_j . q) scale;
//                R_j = decay R_j;  delta = (v_j - R_j . k) beta;  R_j += delta k.
void gdn_step_reverse(float* R, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                      int64_t d, float* o);

// Scalar reference twins (the same operation order; used by tests and on CPUs without AVX-512).
void gdn_step_ref(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                  int64_t d, float* o);
void gdn_step_reverse_ref(float* R, const float* q, const float* k, const float* v, float decay, float beta,
                          float scale, int64_t d, float* o);

}  // namespace clover::kernels
