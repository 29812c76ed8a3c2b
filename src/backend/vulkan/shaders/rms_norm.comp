#version 450
// RMSNorm over rows of n values, the twin of model::ops::rms_norm (src/model/ops.h), with the
// forms the forward pass uses (push `mode`):
//   0  y = x / sqrt(mean(x^2) + eps) * w           (layer and per-head norms)
//   1  y = x / sqrt(mean(x^2) + eps) * post        (no weight; the GDN L2 norm is mode 1 with
//                                                   eps / n and post = 1 / sqrt(n), as ops::l2_norm)
//   2  y = x / sqrt(mean(x^2) + eps) * w * silu(z) (the GDN gated norm of each head's output)
// A "row" is one head of one token: row (t, h) starts at t * row_stride + h * head_stride (x) and
// likewise for y and z (z shares y's strides). One workgroup per row; the sum of squares is a
// float tree in shared memory (the CPU adds float squares in double: a difference of an ulp or so).
//
// With ADD (rms_norm_add, mode 0 only): the residual add before a norm in one dispatch,
//   x += r;  y = x / sqrt(mean(x^2) + eps) * w
// (r at x's strides), bitwise elementwise.comp's add followed by this norm: each invocation
// stores x + r and squares the same float, and reads back only the values it stored itself.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
#if defined(ADD)
layout(std430, binding = 0) buffer In { float x[]; };             // the residual stream, added to
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) readonly buffer Res { float r[]; };    // what is added
#else
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) readonly buffer Gate { float z[]; };
#endif
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

layout(push_constant) uniform Push {
  uint n;
  uint heads;        // rows per token
  uint x_row_stride, x_head_stride;
  uint y_row_stride, y_head_stride;
  float eps;
  float post;
  uint mode;
} p;

const uint WG = 64;
shared float partial[WG];

void main() {
  const uint t = gl_WorkGroupID.x / p.heads, h = gl_WorkGroupID.x % p.heads;
  const uint xb = t * p.x_row_stride + h * p.x_head_stride;
  const uint yb = t * p.y_row_stride + h * p.y_head_stride;
  const uint tid = gl_LocalInvocationID.x;
  float s = 0.0;
#if defined(ADD)
  for (uint i = tid; i < p.n; i += WG) {
    const float v = x[xb + i] + r[xb + i];
    x[xb + i] = v;
    s += v * v;
  }
#else
  for (uint i = tid; i < p.n; i += WG) s += x[xb + i] * x[xb + i];
#endif
  partial[tid] = s;
  barrier();
  for (uint k = WG / 2u; k > 0u; k >>= 1) {
    if (tid < k) partial[tid] += partial[tid + k];
    barrier();
  }
  const float mean = partial[0] / float(p.n);
  const float scale = 1.0 / sqrt(mean + p.eps);
  for (uint i = tid; i < p.n; i += WG) {
    const float v = x[xb + i] * scale;
#if defined(ADD)
    y[yb + i] = v * w[i];
#else
    if (p.mode == 0u) {
      y[yb + i] = v * w[i];
    } else if (p.mode == 1u) {
      y[yb + i] = v * p.post;
    } else {
      const float g = z[yb + i];
      y[yb + i] = v * w[i] * (g / (1.0 + exp(-g)));
    }
#endif
  }
}
