// Helpers every shader shares. Buffers are read as 32-bit words (no 8/16-bit storage feature
// needed; the ggml blocks of 18 and 34 bytes are not word aligned), and fp16 is converted with
// integer arithmetic, so the results do not depend on how a driver converts or flushes halves.

// Byte `off` of a word array.
#define BYTE_AT(buf, off) ((buf[(off) >> 2] >> (((off) & 3u) * 8u)) & 0xffu)
// The 16-bit value at even byte `off`.
#define U16_AT(buf, off) ((buf[(off) >> 2] >> (((off) & 2u) * 8u)) & 0xffffu)

// fp16 bits -> fp32, exact (subnormals kept), as kernels::fp16_to_fp32.
float f16_to_f32(uint h) {
  uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu;
  uint m = h & 0x3ffu;
  if (e == 0u) {
    float v = float(m) * 5.9604644775390625e-8;  // m * 2^-24, exact
    return sign != 0u ? -v : v;
  }
  if (e == 31u) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// fp32 -> fp16 bits, round to nearest even (the integer method of kernels::fp32_to_fp16).
uint f32_to_f16(float f) {
  uint u = floatBitsToUint(f);
  uint sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u | ((u >> 13) & 0x3ffu);
  if (u >= 0x47800000u) return sign | 0x7c00u;
  if (u < 0x38800000u) {
    precise float t = uintBitsToFloat(u) + 0.5;  // aligns the 10 result bits; the add rounds them
    return sign | (floatBitsToUint(t) - 0x3f000000u);
  }
  uint odd = (u >> 13) & 1u;
  u += 0xc8000fffu + odd;  // (15 - 127) << 23, wrapped, plus the rounding bias
  return sign | (u >> 13);
}

// A value rounded to fp16 and back (what the CPU's F16 matmul does to activations).
float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

// fp32 -> bf16 bits, round to nearest even, NaN kept quiet (kernels::fp32_to_bf16).
uint f32_to_bf16(float f) {
  const uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
// A value rounded to bf16 and back (what the CPU's BF16 matmul does to activations).
float round_bf16(float x) { return uintBitsToFloat(f32_to_bf16(x) << 16); }
