// Shared by matmul.cpp and the per-ISA kernel files; not part of the kernels' public interface.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

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

  int64_t act_index(int64_t i) const { return sel ? sel[i] : i; }
};

// Activation rows per panel of a long batch: as many as fit in 256 KiB (a quarter of a 1 MiB
// L2), rounded down to a multiple of the tile height na, at least na.
inline int64_t panel_rows(size_t act_row_bytes, int na) {
  const int64_t fit = act_row_bytes ? static_cast<int64_t>((size_t{256} << 10) / act_row_bytes) : int64_t{1} << 40;
  return fit < na ? na : fit / na * na;
}

// Each ISA file provides one entry point; they are compiled with different target flags and
// only called when the CPU has the instructions.
void matmul_avx2(const MatmulCall& c);
void matmul_avx512(const MatmulCall& c);

// Q8_0 activation rows are also stored, after the plain rows in the same buffer, in a layout the
// AVX-512 kernels can feed straight into vpdpbusd. Per group of 4 blocks (128 values, 256 bytes):
//   lo[64]   bytes 0..15 of blocks 0..3 (16 bytes per block)
//   hi[64]   bytes 16..31 of blocks 0..3
//   lsum[16] int32: lane j = sum of lo[4j..4j+3] + hi[4j..4j+3] (the bytes dpbusd lane j sees)
//   d[16]    float: lane j = scale of block j / 4
// A last partial group is zero-padded (zero bytes, zero scale).
constexpr int64_t kPackGroupValues = 128;
constexpr size_t kPackGroupBytes = 256;
constexpr size_t kPackAlign = 64;

// Row stride of the packed copy: one spare cache line per row, so that rows of a power-of-two
// size do not all map to the same L1 sets.
inline size_t packed_row_bytes(int64_t cols) {
  return static_cast<size_t>((cols + kPackGroupValues - 1) / kPackGroupValues) * kPackGroupBytes + kPackAlign;
}

// One row of Q8_0 activations (ggml's x86 quantiser) and its packed copy, with AVX-512;
// bit-identical to quantize_row_q8_0_activation followed by the scalar packing in matmul.cpp.
void convert_q8_0_avx512(const float* x, int64_t cols, BlockQ8_0* row, uint8_t* packed);

// fp32 -> fp16 with F16C and fp32 -> bf16 with AVX2 integer ops (AVX2 and AVX-512 paths);
// bit-identical to fp32_to_fp16 / fp32_to_bf16.
void convert_f16_f16c(const float* x, int64_t n, uint16_t* dst);
void convert_bf16_avx2(const float* x, int64_t n, uint16_t* dst);

// The packed rows start at the first 64-byte boundary after the plain rows, leaving at least
// one byte, in which ActRows::convert records the distance (1..64). Reading the distance rather
// than recomputing it keeps a copied ActRows (whose buffer may sit at another alignment) valid;
// the kernels use unaligned loads, which cost nothing when the data is aligned.
inline const uint8_t* packed_rows(const ActRows& a) {
  const auto* end = static_cast<const uint8_t*>(a.row(a.rows()));
  return end + end[0];
}
inline uint8_t* place_packed_rows(uint8_t* end) {
  const auto p = reinterpret_cast<uintptr_t>(end);
  const uintptr_t start = (p + kPackAlign) & ~static_cast<uintptr_t>(kPackAlign - 1);
  end[0] = static_cast<uint8_t>(start - p);
  return end + end[0];
}

}  // namespace clover::kernels::detail
