// One super-block of 256 activations -> Q8_K, by the 64 invocations of a workgroup, 4 values
// each: the twin of kernels::quantize_row_q8_k_activation (src/kernels/kquant.h). The value of
// largest magnitude (the first, on ties) maps to -127: iscale = -127 / max,
// q = min(127, round-half-even(iscale * x)), d = 1 / iscale (0 and q = 0 for an all-zero block).
// Written in the layout of quantize_q8_0_activation.comp, which matmul.comp reads: q as
// [rows][cols / 32][8] words of four int8 each, d as [rows][cols / 32] floats, the super-block's
// d repeated for its 8 sub-blocks of 32. The including shader declares `uint q[]` and `float d[]`.
// Shared by quantize_q8_k_activation.comp and rms_norm.comp QUANT Q8_K, so a fused quantisation is
// bitwise the separate one. Call from uniform control flow (the search has barriers).
shared float q8k_amax[64];
shared uint q8k_idx[64];

// The super-block's largest magnitude (am) and the index (0..255) of its first occurrence (256:
// none, an all-zero or all-NaN block), from invocation k's values 4k..4k+3.
uint q8k_find_max(const uint k, const float xv[4], out float am) {
  float amax = 0.0;
  uint idx = 256u;
  for (uint j = 0; j < 4u; ++j) {
    if (abs(xv[j]) > amax) {
      amax = abs(xv[j]);
      idx = 4u * k + j;
    }
  }
  barrier();  // a previous super-block's readers of q8k_amax[0] are done
  q8k_amax[k] = amax;
  q8k_idx[k] = idx;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (k < s) {
      const float a = q8k_amax[k + s];
      const uint i = q8k_idx[k + s];
      if (a > q8k_amax[k] || (a == q8k_amax[k] && i < q8k_idx[k])) {
        q8k_amax[k] = a;
        q8k_idx[k] = i;
      }
    }
    barrier();
  }
  am = q8k_amax[0];
  return q8k_idx[0];
}

// Invocation k's word of the super-block whose first sub-block is sub0, given the super-block's
// largest magnitude am and the signed value vmax found there.
void q8k_write(const uint k, const float xv[4], const float am, const float vmax, const uint sub0) {
  precise const float iscale = am != 0.0 ? -127.0 / vmax : 0.0;
  uint word = 0u;
  for (uint j = 0; j < 4u; ++j) {
    precise const float t = iscale * xv[j];
    const int v = min(127, int(roundEven(t)));
    word |= (uint(v) & 0xffu) << (8u * j);
  }
  q[sub0 * 8u + k] = word;
  if (k < 8u) d[sub0 + k] = am != 0.0 ? 1.0 / iscale : 0.0;
}
