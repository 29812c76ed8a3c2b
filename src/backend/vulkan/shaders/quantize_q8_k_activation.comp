#version 450
// Activation rows -> Q8_K for the K-quant and IQ4_XS products: the twin of
// kernels::quantize_row_q8_k_activation (src/kernels/kquant.h). Per super-block of 256: the
// value of largest magnitude (the first, on ties) maps to -127: iscale = -127 / max,
// q = min(127, round-half-even(iscale * x)), d = 1 / iscale (0 and q = 0 for an all-zero block).
// One invocation per super-block. Output in the layout of quantize_q8_0_activation.comp, which
// matmul.comp reads: q as [rows][cols / 32][8] words of four int8 each, and d as [rows][cols / 32]
// floats, the super-block's d repeated for its 8 sub-blocks of 32 (the bsums of Q8_K are not
// stored: matmul.comp sums the quants it reads).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Quants { uint q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };

layout(push_constant) uniform Push {
  uint cols;      // multiple of 256
  uint n_rows;
  uint x_stride;  // floats between input rows
} p;

void main() {
  const uint nb = p.cols / 256u;
  const uint g = gl_GlobalInvocationID.x;
  if (g >= nb * p.n_rows) return;
  const uint r = g / nb, b = g % nb;
  const uint base = r * p.x_stride + b * 256u;
  float amax = 0.0, vmax = 0.0;
  for (uint j = 0; j < 256u; ++j) {
    const float v = x[base + j];
    if (abs(v) > amax) {
      amax = abs(v);
      vmax = v;
    }
  }
  const uint sub0 = r * (p.cols / 32u) + 8u * b;  // the first of the super-block's 8 sub-blocks
  precise const float iscale = amax != 0.0 ? -127.0 / vmax : 0.0;
  for (uint k = 0; k < 64u; ++k) {
    uint word = 0u;
    for (uint j = 0; j < 4u; ++j) {
      precise const float t = iscale * x[base + 4u * k + j];
      const int v = min(127, int(roundEven(t)));
      word |= (uint(v) & 0xffu) << (8u * j);
    }
    q[sub0 * 8u + k] = word;
  }
  const float dv = amax != 0.0 ? 1.0 / iscale : 0.0;
  for (uint s = 0; s < 8u; ++s) d[sub0 + s] = dv;
}
