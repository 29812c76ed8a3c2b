// The K-quant block formats (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights; Q8_K activations): value access,
// dequantisation, the file quantisers (this project's own scale search) and the Q8_K activation
// quantiser of ggml-cpu. Layouts: kernels/dtype.h; docs/quantize.md describes the search.
#pragma once
#include <cstdint>
#include <cstring>

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
// k4_scale_min for all 8 sub-blocks at once, on the three dwords of the 12 scale bytes: byte j of
// *sc (*mn) is sub-block j's scale (min). The vector kernels widen these bytes in one step.
inline void k4_scales_mins(const uint8_t* s, uint64_t* sc, uint64_t* mn) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  *sc = (uint64_t{(u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4)} << 32) | (u[0] & 0x3f3f3f3fu);
  *mn = (uint64_t{((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4)} << 32) | (u[1] & 0x3f3f3f3fu);
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

// Q2_K and Q3_K (kquant_low.cpp): value k of a block lies in the 2-bit plane of its half h =
// k / 128 and shift s = (k % 128) / 32: bits 2s..2s+1 of qs[32h + k % 32]; its sub-block of 16
// is k / 16.
inline int q2_k_value(const BlockQ2_K& b, int k) { return (b.qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3; }
// Q3_K's signed value (-4..3): the low 2 bits, minus 4 when bit k / 32 of hmask[k % 32] is clear.
inline int q3_k_value(const BlockQ3_K& b, int k) {
  const int low = (b.qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
  return low - (((b.hmask[k % 32] >> (k / 32)) & 1) ? 0 : 4);
}
// Q3_K's scale of sub-block j (0..15), signed (-32..31): the low 4 bits in nibble j / 8 of
// scales[j % 8], the high 2 bits in bits 2 (j / 4)..+1 of scales[8 + j % 4], stored with +32.
inline int q3_k_scale(const BlockQ3_K& b, int j) {
  const int lo = (b.scales[j % 8] >> (4 * (j / 8))) & 0x0f;
  const int hi = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// File quantisers: n (a multiple of 256) values of one row into blocks.
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t n);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t n);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n);

// Dequantisation in ggml's float operations (the embedding lookup gives llama.cpp's bits).
void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t n);
void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t n);
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t n);

// ggml-cpu's Q8_K activation quantiser (x86 uses the reference one): per 256 values, the value
// of largest magnitude (the first, on ties) maps to -127, iscale = -127 / max, q = min(127,
// round-half-even(iscale * x)), d = 1 / iscale, bsums = the 16 sums of 16 q.
void quantize_row_q8_k_activation(const float* x, BlockQ8_K* y, int64_t n);

}  // namespace clover::kernels
