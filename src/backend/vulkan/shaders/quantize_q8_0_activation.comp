#version 450
// Activation rows -> Q8_0 blocks for the quantised matmuls: the twin of
// kernels::quantize_row_q8_0_activation (src/kernels/convert.h). Per block of 32:
// d = fp16(amax / 127), id = amax ? 127 / amax : 0, q = round-half-even(x * id).
// One invocation per block. Output layout (matmul.comp reads it): q as [rows][nb][8] words of
// four int8 each, the scale fp16(d) widened to float as [rows][nb]. With Q8_1 (twin:
// kernels::quantize_row_q8_1_activation) the scales are [rows][nb][2]: fp16(d) and
// s = fp16(amax / 127 x the sum of the quants), the offset term of Q4_1 / Q5_1 products.
// With SWIGLU the block is first x = silu(x) * u in place (swiglu.comp's arithmetic: bitwise the
// two dispatches, one barrier fewer), for the down products of the FFNs.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
#if defined(SWIGLU)
layout(std430, binding = 0) buffer In { float x[]; };
layout(std430, binding = 3) readonly buffer U { float u[]; };  // x_stride apart, as x
#else
layout(std430, binding = 0) readonly buffer In { float x[]; };
#endif
layout(std430, binding = 1) writeonly buffer Quants { uint q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };

layout(push_constant) uniform Push {
  uint cols;      // multiple of 32
  uint n_rows;
  uint x_stride;  // floats between input rows
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
#else
    v[j] = x[base + j];
#endif
  }
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
