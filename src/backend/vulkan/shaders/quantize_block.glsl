// One block of 32 activations -> Q8_0 (or Q8_1, with Q8_1 defined) at block index g of a
// scratch: the twin of kernels::quantize_row_q8_0_activation / quantize_row_q8_1_activation
// (src/kernels/convert.h). d = fp16(amax / 127), id = amax ? 127 / amax : 0,
// q = round-half-even(x * id). The including shader declares `uint q[]` (the quants as [rows][nb][8]
// words of four int8 each) and `float d[]` (the scale fp16(d) widened to float as [rows][nb]; with
// Q8_1 [rows][nb][2]: fp16(d) and s = fp16(amax / 127 x the sum of the quants), the offset term
// of Q4_1 / Q5_1 products). Shared by quantize_q8_0_activation.comp and rms_norm.comp QUANT, so
// a fused quantisation is bitwise the separate one.
void quantize_block(const float v[32], uint g) {
  float amax = 0.0;
  for (uint j = 0; j < 32u; ++j) amax = max(amax, abs(v[j]));
#if defined(Q8_1)
  d[2u * g] = f16_to_f32(f32_to_f16(amax / 127.0));
  int sum = 0;
#else
  d[g] = f16_to_f32(f32_to_f16(amax / 127.0));
#endif
  // amax below ~1e-38 makes 127 / amax overflow; the CPU's x86 conversion then saturates: the
  // values are all (near) zero, so their quants are 0 or -128 there and 0 here (see the test).
  const float id = amax != 0.0 ? 127.0 / amax : 0.0;
  for (uint k = 0; k < 8u; ++k) {
    uint word = 0u;
    for (uint j = 0; j < 4u; ++j) {
      const int qv = int(clamp(roundEven(v[4u * k + j] * id), -128.0, 127.0));
      word |= (uint(qv) & 0xffu) << (8u * j);
#if defined(Q8_1)
      sum += qv;
#endif
    }
    q[g * 8u + k] = word;
  }
#if defined(Q8_1)
  d[2u * g + 1u] = f16_to_f32(f32_to_f16(amax / 127.0 * float(sum)));
#endif
}
