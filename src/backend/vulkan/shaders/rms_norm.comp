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
// Fused forms (ADD and COMBINE: a layer's residual adds, mode 0, one head a row), each bitwise the
// dispatches it replaces (one barrier fewer each):
//   ADD      x += r;  y = x / sqrt(mean(x^2) + eps) * w  (elementwise.comp's add, then this norm:
//            each invocation stores x + r and squares the same float, and reads back only the
//            values it stored itself)
//   COMBINE  with ADD, r is the MoE layer's output computed in place (moe_combine.glsl, the
//            arithmetic of moe_combine.comp), so the combine, the add and the norm are one dispatch
//   QUANT    (with or without ADD, any mode) y is also quantised to Q8_0 blocks (Q8_1 with Q8_1
//            defined) for the products that read it (quantize_block.glsl, the arithmetic of
//            quantize_q8_0_activation.comp): the row is kept in shared memory (n <= MAX_N, a
//            multiple of 32), quantised block by block; with Q8_K defined, to Q8_K super-blocks
//            (quantize_q8_k.glsl, the arithmetic of quantize_q8_k_activation.comp), the 64
//            invocations together on each super-block in turn; heads of n < 256 (256 a multiple
//            of n) are normed 256 / n to a workgroup, one after the other, so that a super-block
//            spans them (the GDN gated norm's heads of 128)
//   ROPE     (mode 0, per head) the NEOX rotation of the head's first n_rot values follows the
//            norm (rope_neox.comp's arithmetic on the normed values, the host's cos/sin table):
//            the attention's q and k norms and their rope in one dispatch
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
#if defined(ADD)
layout(std430, binding = 0) buffer In { float x[]; };             // the residual stream, added to
#else
layout(std430, binding = 0) readonly buffer In { float x[]; };
#endif
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
#if defined(COMBINE)
layout(std430, binding = 2) readonly buffer Down { float down[]; };    // [routed rows][n]
layout(std430, binding = 4) readonly buffer Shared { float sh[]; };    // [tokens][n]
layout(std430, binding = 5) readonly buffer Weights { float wts[]; };  // [tokens][k]
layout(std430, binding = 6) readonly buffer Groups { int grp[]; };     // moe_group.comp's layout
layout(std430, binding = 7) readonly buffer Gamma { float gamma[]; };  // [tokens] (stride gamma_stride)
#include "moe_combine.glsl"
#define QUANT_BINDING 8
#elif defined(ADD)
layout(std430, binding = 2) readonly buffer Res { float r[]; };    // what is added
#define QUANT_BINDING 4
#else
layout(std430, binding = 2) readonly buffer Gate { float z[]; };
#define QUANT_BINDING 4
#endif
layout(std430, binding = 3) writeonly buffer Out { float y[]; };
#if defined(ROPE)
layout(std430, binding = 4) readonly buffer Table { vec2 cs[]; };  // [tokens][n_rot / 2] (rope_table.h)
const uint MAX_N = 4096;
shared float row_out[MAX_N];
#endif
#if defined(QUANT)
layout(std430, binding = QUANT_BINDING) writeonly buffer Quants { uint q[]; };      // [rows][n / 32][8]
layout(std430, binding = QUANT_BINDING + 1) writeonly buffer Scales { float d[]; };  // [rows][n / 32] (x2: Q8_1)
#if defined(Q8_K)
#include "quantize_q8_k.glsl"
#else
#include "quantize_block.glsl"
#endif
const uint MAX_N = 4096;  // ops.h kNormQuantizeMaxCols
shared float row_out[MAX_N];
#endif

layout(push_constant) uniform Push {
  uint n;
  uint heads;        // rows per token
  uint x_row_stride, x_head_stride;
  uint y_row_stride, y_head_stride;
  float eps;
  float post;
  uint mode;
#if defined(COMBINE)
  uint k, tokens, n_expert, gamma_stride;
#endif
#if defined(ROPE)
  uint n_rot;
#endif
} p;

const uint WG = 64;
shared float partial[WG];

// Rows a workgroup norms in turn: one, except that Q8_K super-blocks of 256 need 256 / n heads of
// n < 256 side by side (the GDN gated norm's heads of 128: two a workgroup).
uint rows_per_group() {
#if defined(Q8_K)
  return p.n < 256u ? 256u / p.n : 1u;
#else
  return 1u;
#endif
}

void main() {
  const uint rpg = rows_per_group(), groups_per_token = p.heads / rpg;
  const uint t = gl_WorkGroupID.x / groups_per_token, h0 = (gl_WorkGroupID.x % groups_per_token) * rpg;
  const uint tid = gl_LocalInvocationID.x;
  for (uint rr = 0u; rr < rpg; ++rr) {  // uniform
    if (rr > 0u) barrier();  // the previous row's readers of partial[0] are done
    const uint h = h0 + rr;
    const uint xb = t * p.x_row_stride + h * p.x_head_stride;
    const uint yb = t * p.y_row_stride + h * p.y_head_stride;
    float s = 0.0;
#if defined(ADD)
    for (uint i = tid; i < p.n; i += WG) {
#if defined(COMBINE)
      const float v = x[xb + i] + combine_value(t, i, p.n, p.k, p.tokens, p.n_expert, p.gamma_stride);
#else
      const float v = x[xb + i] + r[xb + i];
#endif
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
      const float o = v * w[i];
#else
      float o;
      if (p.mode == 0u) {
        o = v * w[i];
      } else if (p.mode == 1u) {
        o = v * p.post;
      } else {
        const float g = z[yb + i];
        o = v * w[i] * (g / (1.0 + exp(-g)));
      }
#endif
#if defined(ROPE)
      if (i < p.n_rot)
        row_out[i] = o;  // rotated below
      else
        y[yb + i] = o;
#else
      y[yb + i] = o;
#endif
#if defined(QUANT)
      row_out[rr * p.n + i] = o;
#endif
    }
#if defined(ROPE)
    barrier();
    const uint half_rot = p.n_rot / 2u;
    for (uint i = tid; i < half_rot; i += WG) {
      const vec2 c = cs[t * half_rot + i];
      const float x0 = row_out[i], x1 = row_out[i + half_rot];
      precise float a = fma(x0, c.x, -(x1 * c.y));  // rope_neox.comp's two outputs
      precise float b = fma(x0, c.y, x1 * c.x);
      y[yb + i] = a;
      y[yb + i + half_rot] = b;
    }
#endif
  }
#if defined(QUANT)
  // Rows (t, h0 ..) are blocks [(t * heads + h0) * n / 32, ...) of the quantised rows: the heads
  // of a token lie side by side in y (y_head_stride == n), each a whole number of blocks.
  barrier();
  const uint nb = p.n / 32u, first = (t * p.heads + h0) * nb;
#if defined(Q8_K)
  for (uint sb = 0u; sb < rpg * p.n / 256u; ++sb) {  // uniform: every invocation takes every super-block
    float xv[4];
    for (uint j = 0; j < 4u; ++j) xv[j] = row_out[sb * 256u + 4u * tid + j];
    float am;
    const uint idx = q8k_find_max(tid, xv, am);
    const float vmax = am != 0.0 ? row_out[sb * 256u + idx] : 0.0;
    q8k_write(tid, xv, am, vmax, first + 8u * sb);
  }
#else
  for (uint b = tid; b < nb; b += WG) {
    float v[32];
    for (uint j = 0; j < 32u; ++j) v[j] = row_out[b * 32u + j];
    quantize_block(v, first + b);
  }
#endif
#endif
}
