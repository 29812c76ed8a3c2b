#version 450
// Activation rows -> Q8_K for the K-quant and IQ4_XS products: the twin of
// kernels::quantize_row_q8_k_activation (src/kernels/kquant.h). Per super-block of 256: the
// value of largest magnitude (the first, on ties) maps to -127: iscale = -127 / max,
// q = min(127, round-half-even(iscale * x)), d = 1 / iscale (0 and q = 0 for an all-zero block).
// One workgroup of 64 per super-block (x: super-block of the row, y: row), an invocation per 4
// values: the largest magnitude and its first index meet in a shared-memory tree (the first index
// wins ties, so the pick is the serial search's), then each invocation writes its word. Output in the layout of quantize_q8_0_activation.comp, which
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

shared float s_amax[64];
shared uint s_idx[64];

void main() {
  const uint b = gl_WorkGroupID.x, r = gl_WorkGroupID.y, k = gl_LocalInvocationID.x;
  const uint base = r * p.x_stride + b * 256u;
  float xv[4];
  float amax = 0.0;
  uint idx = 256u;  // none: an all-zero (or all-NaN) block keeps amax 0
  for (uint j = 0; j < 4u; ++j) {
    xv[j] = x[base + 4u * k + j];
    if (abs(xv[j]) > amax) {
      amax = abs(xv[j]);
      idx = 4u * k + j;
    }
  }
  s_amax[k] = amax;
  s_idx[k] = idx;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (k < s) {
      const float a = s_amax[k + s];
      const uint i = s_idx[k + s];
      if (a > s_amax[k] || (a == s_amax[k] && i < s_idx[k])) {
        s_amax[k] = a;
        s_idx[k] = i;
      }
    }
    barrier();
  }
  const float am = s_amax[0];
  const float vmax = am != 0.0 ? x[base + s_idx[0]] : 0.0;
  const uint sub0 = r * (p.cols / 32u) + 8u * b;  // the first of the super-block's 8 sub-blocks
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
