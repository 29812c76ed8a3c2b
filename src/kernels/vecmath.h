// Element-wise math of the forward pass (exp, silu, swiglu, softmax terms, the GDN causal conv) in
// ggml-cpu's numerics, so that the engine's F32 parts give llama.cpp's bits and reduced-precision
// weights (whose activation rounding turns an ulp into a visible step) stay on llama.cpp's path.
//
// ggml-cpu's AVX-512 build computes exp over 16-value chunks with a polynomial (ggml_v_expf: range
// reduction by ln 2 in two parts, a degree-5 polynomial, scaling by 2^n) and the values past the last
// whole chunk of a row with libm's expf. silu(x) = x / (1 + exp(0 - x)); swiglu(g, u) = silu(g) * u;
// a softmax row's terms exp(x - max) are summed per chunk with the lane tree of a 16-lane
// reduction (l + 8, + 4, + 2, + 1) and the chunk sums added in double. Which function a value gets
// depends only on its index in the row (index < n & ~15: the polynomial), never on the ISA: the
// scalar twins (`*_ref`) compute the same lane operations with std::fma, and every ISA path gives
// their bits.
#pragma once
#include <cstdint>

namespace clover::kernels {

// One lane of ggml_v_expf.
float exp_lane(float x);

// y[i] = silu(x[i]) for i in [b, e) of a row of n values (in place allowed).
void silu_span(float* y, const float* x, int64_t n, int64_t b, int64_t e);
inline void silu_row(float* y, const float* x, int64_t n) { silu_span(y, x, n, 0, n); }

// g[i] = silu(g[i]) * u[i] for i in [b, e) of a row of n values.
void swiglu_span(float* g, const float* u, int64_t n, int64_t b, int64_t e);

// y[i] = exp(x[i] - max) over a row of n values (in place allowed); returns their sum as
// ggml_vec_soft_max_f32 adds it.
double softmax_exp_row(float* y, const float* x, int64_t n, float max);

// The causal depthwise conv of a GDN layer followed by silu, for channels [c_begin, c_end) of one
// position: y[c] = silu(sum_j taps[j][c] * w_taps[j * C + c]), the sum a chain of fused
// multiply-adds from 0 over j = 0 .. K-1 (ggml's SSM_CONV as GCC contracts it), silu as silu_span
// over a row of C. The weights tap-major, [K][C] (conv_taps_major of the file's [C][K]), so that
// 16 channels' tap j is one load, not a gather.
void conv_taps_major(const float* w, int K, int64_t C, float* w_taps);
void conv_silu(const float* const* taps, int K, const float* w_taps, int64_t C, int64_t c_begin, int64_t c_end, float* y);

// Scalar reference twins.
void silu_span_ref(float* y, const float* x, int64_t n, int64_t b, int64_t e);
void swiglu_span_ref(float* g, const float* u, int64_t n, int64_t b, int64_t e);
double softmax_exp_row_ref(float* y, const float* x, int64_t n, float max);
void conv_silu_ref(const float* const* taps, int K, const float* w_taps, int64_t C, int64_t c_begin, int64_t c_end, float* y);

}  // namespace clover::kernels
