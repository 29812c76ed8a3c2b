// The blocks of 32 beyond Q4_0 / Q8_0: Q4_1, Q5_0, Q5_1 and IQ4_NL weights and the Q8_1
// activations that Q4_1 / Q5_1 products use; and IQ4_XS, IQ4_NL's table in super-blocks of 256
// (its kernels sit with the K-quants'). Layouts: kernels/dtype.h. Value access,
// dequantisation in ggml's float operations, this project's own file quantisers and ggml-cpu's
// x86 Q8_1 activation quantiser.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"

namespace clover::kernels {

// The 4 low bits of value k (0..31): low nibbles of qs[0..15] are values 0..15, high nibbles 16..31.
inline int legacy_nibble(const uint8_t* qs, int k) { return k < 16 ? qs[k] & 0x0f : qs[k - 16] >> 4; }
// Bit 4 of value k of a Q5 block: bit k of qh as a little-endian uint32.
inline int legacy_high_bit(const uint8_t* qh, int k) { return (qh[k / 8] >> (k % 8)) & 1; }

// Unsigned quantised values: Q4_1 0..15, Q5_0 and Q5_1 0..31 (Q5_0 means q - 16).
inline int q4_1_value(const BlockQ4_1& b, int k) { return legacy_nibble(b.qs, k); }
inline int q5_0_value(const BlockQ5_0& b, int k) { return legacy_nibble(b.qs, k) | (legacy_high_bit(b.qh, k) << 4); }
inline int q5_1_value(const BlockQ5_1& b, int k) { return legacy_nibble(b.qs, k) | (legacy_high_bit(b.qh, k) << 4); }

// IQ4_NL's 16 levels (ggml's kvalues_iq4nl: part of the file format).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
inline int iq4_nl_value(const BlockIQ4_NL& b, int k) { return kIq4nlValues[legacy_nibble(b.qs, k)]; }
// IQ4_XS (dtype.h): the signed scale ls - 32 of sub-block j (0..7) and the table value of value k.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  return (((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((b.scales_h >> (2 * j)) & 3) << 4)) - 32;
}
inline int iq4_xs_value(const BlockIQ4_XS& b, int k) { return kIq4nlValues[legacy_nibble(b.qs + 16 * (k / 32), k % 32)]; }

// File quantisers: n (a multiple of 32) values into blocks. Q4_1 / Q5_1 fit x ~ d q + m per
// block, Q5_0 x ~ d (q - 16); each tries candidate steps, refits by least squares and keeps the
// least squared error against the fp16 scales as stored (docs/quantize.md).
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t n);
// IQ4_NL: x ~ d * table[q]; candidate scales around max / -127 (or / 113 for the other sign),
// each rounded to the nearest level, refitted by least squares and checked against the stored d.
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n);
// IQ4_XS (n a multiple of 256): the IQ4_NL fit per sub-block of 32 in float, the sub-block scales
// rounded to 6 bits under one fp16 d, then the values rounded again against the stored scales.
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n);

// ggml's dequantisers (value = q * d + m, or (q - 16) * d; no fused multiply-add).
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t n);
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n);
void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n);

// ggml-cpu's x86 Q8_1 activation quantiser: the qs and d of quantize_row_q8_0_activation, and
// s = fp16(d * sum(q)) with d = amax / 127 before its rounding to fp16.
void quantize_row_q8_1_activation(const float* x, BlockQ8_1* y, int64_t n);

}  // namespace clover::kernels
