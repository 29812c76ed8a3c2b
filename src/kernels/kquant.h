// The K-quant block formats (Q4_K, Q5_K, Q6_K weights; Q8_K activations): value access,
// dequantisation, the file quantisers (this project's own scale search) and the Q8_K activation
// quantiser of ggml-cpu. Layouts: kernels/dtype.h; docs/quantize.md describes the search.
#pragma once
#include <cstdint>

#include "kernels/dtype.h"

namespace clover::kernels {

// Scale and min of sub-block j (0..7) of a Q4_K / Q5_K block, 6 bits each: sub-blocks 0..3 keep
// them in the low 6 bits of bytes j and j + 4; sub-blocks 4..7 in the nibbles of byte j + 4
// with their top 2 bits in the spare high bits of bytes j - 4 (scale) and j (min).
inline void k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
// The inverse: packs 8 six-bit scales and mins.
void k4_pack_scales(const uint8_t* sc, const uint8_t* m, uint8_t* s);

// Quantised value k (0..255) of a block (unsigned: Q4_K 0..15, Q5_K 0..31; Q6_K 0..63, stored
// with +32).
inline int q4_k_value(const BlockQ4_K& b, int k) {
  const uint8_t byte = b.qs[32 * (k / 64) + k % 32];
  return k % 64 < 32 ? byte & 0x0f : byte >> 4;
}
inline int q5_k_value(const BlockQ5_K& b, int k) {
  const uint8_t byte = b.qs[32 * (k / 64) + k % 32];
  const int lo = k % 64 < 32 ? byte & 0x0f : byte >> 4;
  return lo | (((b.qh[k % 32] >> (k / 32)) & 1) << 4);
}
// Q6_K: per half of 128 values (h), ql holds 64 bytes and qh 32; value 32g + l of the half
// (g = 0..3) takes its low 4 bits from ql[64h + l + 32 (g & 1)] (low nibble for g < 2, high
// otherwise) and its high 2 bits from bits 2g..2g+1 of qh[32h + l]. Scale: scales[k / 16].
inline int q6_k_value(const BlockQ6_K& b, int k) {
  const int h = k / 128, g = (k % 128) / 32, l = k % 32;
  const uint8_t lo = b.ql[64 * h + l + 32 * (g & 1)];
  const int low = g < 2 ? lo & 0x0f : lo >> 4;
  return low | (((b.qh[32 * h + l] >> (2 * g)) & 3) << 4);
}

// File quantisers: n (a multiple of 256) values of one row into blocks.
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n);

// Dequantisation in ggml's float operations (the embedding lookup gives llama.cpp's bits).
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t n);

// ggml-cpu's Q8_K activation quantiser (x86 uses the reference one): per 256 values, the value
// of largest magnitude (the first, on ties) maps to -127, iscale = -127 / max, q = min(127,
// round-half-even(iscale * x)), d = 1 / iscale, bsums = the 16 sums of 16 q.
void quantize_row_q8_k_activation(const float* x, BlockQ8_K* y, int64_t n);

}  // namespace clover::kernels
