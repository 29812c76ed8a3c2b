#version 450
// Activation rows -> Q8_0 blocks (Q8_1 with Q8_1 defined) for the quantised matmuls, one
// invocation per block of 32: the arithmetic and the layout matmul.comp reads are
// quantize_block.glsl's.
// With SWIGLU the block is first x = silu(x) * u in place (swiglu.comp's arithmetic: bitwise the
// two dispatches, one barrier fewer), for the down products of the FFNs. With GATE it is first
// x *= sigmoid(gate) in place (elementwise.comp mode 1, the attention output gate; gate value c
// of row r at r * g_row + (c / seg) * g_seg + g_off + c % seg), for the output projection.
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

#include "quantize_block.glsl"

layout(push_constant) uniform Push {
  uint cols;      // multiple of 32
  uint n_rows;
  uint x_stride;  // floats between input rows
#if defined(GATE)
  uint g_row, seg, g_seg, g_off;
#endif
} p;

void main() {
  const uint nb = p.cols / 32u;
  const uint g = gl_GlobalInvocationID.x;
  if (g >= nb * p.n_rows) return;
  const uint r = g / nb, b = g % nb;
  const uint base = r * p.x_stride + b * 32u;
  float v[32];
  for (uint j = 0; j < 32u; ++j) {
#if defined(SWIGLU)
    const float xv = x[base + j];
    v[j] = xv / (1.0 + exp(-xv)) * u[base + j];
    x[base + j] = v[j];
#elif defined(GATE)
    const uint c = b * 32u + j;
    const float gv = gate[r * p.g_row + (c / p.seg) * p.g_seg + p.g_off + c % p.seg];
    v[j] = x[base + j] * (1.0 / (1.0 + exp(-gv)));
    x[base + j] = v[j];
#else
    v[j] = x[base + j];
#endif
  }
  quantize_block(v, g);
}
