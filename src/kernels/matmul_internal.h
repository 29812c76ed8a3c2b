// Shared by matmul.cpp and the per-ISA kernel files; not part of the kernels' public interface.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/matmul.h"

namespace clover::kernels::detail {

// The tail of ggml_vec_dot_f32 (the values past the last whole 64) as GCC compiles ggml: groups of
// 8 products rounded to float and added in order, then the last n % 8 values as fused
// multiply-adds (measured against the prebuilt library for every tail length).
inline float dot_tail(const float* x, const float* y, int64_t i, int64_t n, float s) {
  const int64_t grouped = i + (n - i) / 8 * 8;
  for (; i < grouped; ++i) s += x[i] * y[i];  // kernels are built with -ffp-contract=off: not fused
  for (; i < n; ++i) s = std::fma(x[i], y[i], s);
  return s;
}

// ggml_vec_dot_f32 (AVX-512 build): 4 accumulators of 16 lanes of fused multiply-adds over each
// 64 values, added (0 + 2) + (1 + 3), the 16 lanes in the tree l + 8, + 4, then (0 + 2) + (1 + 3),
// then dot_tail. The scalar twin and the AVX-512 path give the same bits. (SumOrder::VecDot for
// F32 weights, the gated delta rule's dot products, the exact attention's scores.)
float vec_dot_f32_ref(const float* x, const float* y, int64_t n);
float vec_dot_f32_avx512(const float* x, const float* y, int64_t n);

// The quantised orders of llama.cpp's x86 kernels. lanes8 (Q8_0 always; Q4_0 matrices whose row
// count is not a multiple of 8): per block, 8 int32 lanes of 4 products each (lane l: values
// 4l..4l+3), each lane's float accumulator += (d_w * d_a) * lane, block after block, then the 8
// lanes added as hsum_float_8 does. blocks (Q4_0 matrices with a multiple of 8 rows, which
// llama.cpp repacks into its 8x8 interleaved layout): per block the exact int32 sum of the 32
// products, one float accumulator += sum * (d_w * d_a), block after block.
inline bool q4_0_blocks_order(int64_t rows) { return rows % 8 == 0; }

// Value k (0..31) of a Q4_0 block: the low nibbles hold values 0..15, the high nibbles 16..31.
inline int q4_0_value(const BlockQ4_0& b, int k) {
  return (k < 16 ? (b.qs[k] & 0x0f) : (b.qs[k - 16] >> 4)) - 8;
}

// hsum_float_8: lanes l + 4, then (0 + 2) + (1 + 3).
inline float hsum8_ref(const float* acc) {
  float r[4];
  for (int i = 0; i < 4; ++i) r[i] = acc[i + 4] + acc[i];
  return (r[0] + r[2]) + (r[1] + r[3]);
}

// Scalar twins of the quantised orders (the AVX-512 path gives their bits).
float q8_0_dot_lanes8_ref(const BlockQ8_0* w, const BlockQ8_0* a, int64_t nb);
float q4_0_dot_lanes8_ref(const BlockQ4_0* w, const BlockQ8_0* a, int64_t nb);
float q4_0_dot_blocks_ref(const BlockQ4_0* w, const BlockQ8_0* a, int64_t nb);

// K-quant weights (matmul_kquant.cpp; the orders are described there). Q4_K matrices with a
// multiple of 8 rows take llama.cpp's repacked orders, summing in groups of 256 values (its gemv)
// or 64 (its gemm).
inline bool q4_k_blocks_order(int64_t rows) { return rows % 8 == 0; }
inline int q4_k_group(SumOrder order) { return order == SumOrder::Gemm ? 64 : 256; }
float q4_k_dot_lanes8_ref(const BlockQ4_K* w, const BlockQ8_K* a, int64_t nb);
float q4_k_dot_blocks_ref(const BlockQ4_K* w, const BlockQ8_K* a, int64_t nb, int group);
float q5_k_dot_lanes8_ref(const BlockQ5_K* w, const BlockQ8_K* a, int64_t nb);
float q6_k_dot_lanes8_ref(const BlockQ6_K* w, const BlockQ8_K* a, int64_t nb);
// IQ4_XS matrices with a multiple of 8 rows take the order of llama.cpp's IQ panel gemm (one
// exact int32 per super-block), which it uses for prompt batches (8 rows or more).
inline bool iq4_xs_blocks_order(int64_t rows) { return rows % 8 == 0; }
float iq4_xs_dot_lanes8_ref(const BlockIQ4_XS* w, const BlockQ8_K* a, int64_t nb);
float iq4_xs_dot_blocks_ref(const BlockIQ4_XS* w, const BlockQ8_K* a, int64_t nb);
// Q2_K and Q3_K (matmul_kquant_low.cpp). Q2_K matrices with a multiple of 8 rows take llama.cpp's
// repacked order (block_q2_Kx8), summing in groups of 256 values (its gemv) or 128 (its gemm).
inline bool q2_k_blocks_order(int64_t rows) { return rows % 8 == 0; }
inline int q2_k_group(SumOrder order) { return order == SumOrder::Gemm ? 128 : 256; }
float q2_k_dot_lanes8_ref(const BlockQ2_K* w, const BlockQ8_K* a, int64_t nb);
float q2_k_dot_blocks_ref(const BlockQ2_K* w, const BlockQ8_K* a, int64_t nb, int group);
float q3_k_dot_lanes8_ref(const BlockQ3_K* w, const BlockQ8_K* a, int64_t nb);
// The twin of the order llama.cpp uses for one row of a `rows`-row matrix of type t.
float kquant_dot_ref(DType t, const void* w, const void* a, int64_t cols, int64_t rows, SumOrder order);

// Q4_1, Q5_0, Q5_1 and IQ4_NL weights (matmul_legacy.cpp; the orders are described there).
float q4_1_dot_ref(const BlockQ4_1* w, const BlockQ8_1* a, int64_t nb);
float q5_0_dot_ref(const BlockQ5_0* w, const BlockQ8_0* a, int64_t nb);
float q5_1_dot_ref(const BlockQ5_1* w, const BlockQ8_1* a, int64_t nb);
// IQ4_NL has three orders: blocks (8k rows, repacked by llama.cpp), and for other row counts
// tinyBLAS's single set of 8 lanes in dense products (SumOrder::Gemm) or vec_dot's pairs of
// blocks in expert products (SumOrder::VecDot).
inline bool iq4_nl_blocks_order(int64_t rows) { return rows % 8 == 0; }
float iq4_nl_dot_lanes8_ref(const BlockIQ4_NL* w, const BlockQ8_0* a, int64_t nb);
float iq4_nl_dot_gemm_ref(const BlockIQ4_NL* w, const BlockQ8_0* a, int64_t nb);
float iq4_nl_dot_blocks_ref(const BlockIQ4_NL* w, const BlockQ8_0* a, int64_t nb);
// The twin of the order llama.cpp uses for one row of a `rows`-row matrix of type t.
float legacy_dot_ref(DType t, const void* w, const void* a, int64_t cols, int64_t rows, SumOrder order);

// A call of matmul or matmul_selected: output row i uses activation row (sel ? sel[i] : i).
struct MatmulCall {
  const MatRef* w;
  const ActRows* acts;
  const int32_t* sel;  // nullptr: identity
  int64_t n;           // activation rows in the call
  float* y;
  int64_t ldy;
  int64_t o_begin, o_end;
  SumOrder order = SumOrder::Gemm;
  const void* then = nullptr;  // where the caller reads next (matmul.h), null: the rows after o_end

  int64_t act_index(int64_t i) const { return sel ? sel[i] : i; }
  // Where the tile of `rows` rows at output row o prefetches while it computes: `lead` bytes into
  // the next tile, or, for the call's last tile, the start of what the caller reads next.
  const uint8_t* tile_prefetch(int64_t o, int64_t rows, size_t lead) const {
    if (then && o + rows >= o_end) return static_cast<const uint8_t*>(then);
    return static_cast<const uint8_t*>(w->data) + static_cast<size_t>(o + rows) * w->row_stride + lead;
  }
};

// Activation rows per panel of a long batch: as many as fit in 256 KiB (a quarter of a 1 MiB
// L2), rounded down to a multiple of the tile height na, at least na.
inline int64_t panel_rows(size_t act_row_bytes, int na) {
  const int64_t fit = act_row_bytes ? static_cast<int64_t>((size_t{256} << 10) / act_row_bytes) : int64_t{1} << 40;
  return fit < na ? na : fit / na * na;
}

// The scalar path for K-quant weights (every row with kquant_dot_ref), and the vector ones
// (matmul_kquant_avx2.cpp; matmul_kquant_avx512.cpp for Q4_K and IQ4_XS of 8k rows, which hands
// Q5_K and Q6_K to matmul_kquant_lanes_avx512.cpp and the other types to the AVX2 code).
void matmul_kquant_ref(const MatmulCall& c);
void matmul_kquant_avx2(const MatmulCall& c);
void matmul_kquant_avx512(const MatmulCall& c);
void matmul_kquant_lanes_avx512(const MatmulCall& c);
// One Q2_K / Q3_K weight row against na <= 4 activation rows (matmul_kquant_low_avx2.cpp):
// out[r][o] = the twin's result for a[r] (Q2_K: the blocks order in groups of `group` values, or
// the lanes order when group is 0).
void q2_k_row_avx2(const BlockQ2_K* w, const BlockQ8_K* const* a, int na, int64_t nb, int group, float* const* out,
                   int64_t o);
void q3_k_row_avx2(const BlockQ3_K* w, const BlockQ8_K* const* a, int na, int64_t nb, float* const* out, int64_t o);
// The same for Q4_1, Q5_0 and Q5_1 (matmul_legacy.cpp, matmul_legacy_avx2.cpp).
void matmul_legacy_ref(const MatmulCall& c);
void matmul_legacy_avx2(const MatmulCall& c);

// Each ISA file provides one entry point; they are compiled with different target flags and
// only called when the CPU has the instructions.
void matmul_avx2(const MatmulCall& c);
void matmul_avx512(const MatmulCall& c);

// One row of Q8_0 activations with ggml's x86 quantiser, with AVX-512; bit-identical to
// quantize_row_q8_0_activation.
void convert_q8_0_avx512(const float* x, int64_t cols, BlockQ8_0* row);
// The same for Q8_K (bit-identical to quantize_row_q8_k_activation; matmul_kquant_avx512.cpp).
void convert_q8_k_avx512(const float* x, int64_t cols, BlockQ8_K* row);

// fp32 -> fp16 with F16C and fp32 -> bf16 with AVX2 integer ops (AVX2 and AVX-512 paths);
// bit-identical to fp32_to_fp16 / fp32_to_bf16.
void convert_f16_f16c(const float* x, int64_t n, uint16_t* dst);
void convert_bf16_avx2(const float* x, int64_t n, uint16_t* dst);

}  // namespace clover::kernels::detail
