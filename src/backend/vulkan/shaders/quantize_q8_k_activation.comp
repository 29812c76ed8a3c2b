#version 450
// Activation rows -> Q8_K for the K-quant and IQ4_XS products: the twin of
// kernels::quantize_row_q8_k_activation (src/kernels/kquant.h). Per super-block of 256: the
// value of largest magnitude (the first, on ties) maps to -127: iscale = -127 / max,
// q = min(127, round-half-even(iscale * x)), d = 1 / iscale (0 and q = 0 for an all-zero block).
// One workgroup of 64 per super-block (x: super-block of the row, y: row), an invocation per 4
// values: the largest magnitude and its first index meet in a shared-memory tree (the first index
// wins ties, so the pick is the serial search's), then each invocation writes its word
// (quantize_q8_k.glsl, shared with rms_norm.comp QUANT Q8_K; the bsums of Q8_K are not stored:
// matmul.comp sums the quants it reads).
// With SWIGLU the values are first x = silu(x) * u in place (swiglu.comp's arithmetic), with GATE
// x *= sigmoid(gate) in place (elementwise.comp mode 1; quantize_q8_0_activation.comp's gate
// indexing): bitwise the two dispatches each replaces, one barrier fewer.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
#if defined(SWIGLU)
layout(std430, binding = 0) buffer In { float x[]; };
layout(std430, binding = 3) readonly buffer U { float u[]; };  // x_stride apart, as x
#elif defined(GATE)
layout(std430, binding = 0) buffer In { float x[]; };
layout(std430, binding = 3) readonly buffer Gate { float gate[]; };
#else
layout(std430, binding = 0) readonly buffer In { float x[]; };
#endif
layout(std430, binding = 1) writeonly buffer Quants { uint q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };

layout(push_constant) uniform Push {
  uint cols;      // multiple of 256
  uint n_rows;
  uint x_stride;  // floats between input rows
#if defined(GATE)
  uint g_row, seg, g_seg, g_off;
#endif
} p;

#include "quantize_q8_k.glsl"
shared float q8k_vmax;  // the super-block's signed maximum, from the invocation that holds it

void main() {
  const uint b = gl_WorkGroupID.x, r = gl_WorkGroupID.y, k = gl_LocalInvocationID.x;
  const uint base = r * p.x_stride + b * 256u;
  float xv[4];
  for (uint j = 0; j < 4u; ++j) {
    const uint at = base + 4u * k + j;
#if defined(SWIGLU)
    const float g = x[at];
    xv[j] = g / (1.0 + exp(-g)) * u[at];
    x[at] = xv[j];
#elif defined(GATE)
    const uint c = b * 256u + 4u * k + j;
    const float gv = gate[r * p.g_row + (c / p.seg) * p.g_seg + p.g_off + c % p.seg];
    xv[j] = x[at] * (1.0 / (1.0 + exp(-gv)));
    x[at] = xv[j];
#else
    xv[j] = x[at];
#endif
  }
  float am;
  const uint idx = q8k_find_max(k, xv, am);
  // The signed value at the maximum: from the invocation that holds it, through shared memory
  // (with SWIGLU or GATE another invocation's x may not be visible yet).
  if (idx != 256u && k == idx / 4u) q8k_vmax = xv[idx % 4u];
  barrier();
  const float vmax = am != 0.0 ? q8k_vmax : 0.0;
  q8k_write(k, xv, am, vmax, r * (p.cols / 32u) + 8u * b);  // the first of the super-block's 8 sub-blocks
}
