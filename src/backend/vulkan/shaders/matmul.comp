#version 450
// y = W x for a chunk of weight rows and up to 8 activation rows per workgroup: the twin of
// kernels::matmul_ref (src/kernels/matmul.h), one variant per weight type (WTYPE_F32, WTYPE_F16,
// WTYPE_Q8_0, WTYPE_Q4_0; BF16 weights are converted to F32 at upload).
//
// Grid: x = output row within the chunk (the host splits W into chunks that fit one binding and
// 65,535 workgroups), y = tile of 8 activation rows. Each of the 64 invocations takes every 64th
// element (float weights) or block of 32 (quantised weights) of the row, so each weight row is
// read once per 8 activation rows; the partial sums meet in a shared-memory tree (no subgroup
// operations: the result does not depend on the subgroup size).
//
// Activations are rounded as the CPU rounds them: F16 weights see fp16-rounded activations;
// Q8_0/Q4_0 weights see Q8_0 blocks made by quantize_q8_0_activation.comp (integer products per
// block, then d_w * d_x * sum as float).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
// Float weights: x is [n_act][x_stride] floats. Quantised: x is [n_act][nb][8] words of int8
// quants and xs [n_act][nb] float scales.
layout(std430, binding = 1) readonly buffer Acts { uint x[]; };
layout(std430, binding = 2) readonly buffer ActScales { float xs[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

layout(push_constant) uniform Push {
  uint rows;      // weight rows in this chunk
  uint cols;
  uint n_act;     // activation rows
  uint w_base;    // byte offset of the chunk's first row inside the W binding
  uint w_stride;  // bytes between weight rows
  uint x_stride;  // floats between activation rows (float weights)
  uint y_stride;  // floats between output rows: y[r * y_stride + o0 + o]
  uint o0;        // first output index of the chunk
} p;

const uint WG = 64;
const uint TILE = 8;
shared float partial[TILE][WG];

void main() {
  const uint o = gl_WorkGroupID.x;
  const uint r0 = gl_WorkGroupID.y * TILE;
  const uint tid = gl_LocalInvocationID.x;
  const uint nr = min(TILE, p.n_act - r0);
  const uint row_off = p.w_base + o * p.w_stride;
  float acc[TILE];
  for (uint r = 0; r < TILE; ++r) acc[r] = 0.0;

#if defined(WTYPE_F32) || defined(WTYPE_F16)
  for (uint i = tid; i < p.cols; i += WG) {
#if defined(WTYPE_F32)
    const float wv = uintBitsToFloat(w[(row_off >> 2) + i]);
#else
    const float wv = f16_to_f32(U16_AT(w, row_off + 2u * i));
#endif
    for (uint r = 0; r < nr; ++r) {
      float xv = uintBitsToFloat(x[(r0 + r) * p.x_stride + i]);
#if defined(WTYPE_F16)
      xv = round_f16(xv);
#endif
      acc[r] += wv * xv;
    }
  }
#else
  const uint nb = p.cols / 32u;
  for (uint b = tid; b < nb; b += WG) {
#if defined(WTYPE_Q8_0)
    const uint boff = row_off + b * 34u;
#else
    const uint boff = row_off + b * 18u;
#endif
    const float dw = f16_to_f32(U16_AT(w, boff));
    int q[32];
#if defined(WTYPE_Q8_0)
    for (uint j = 0; j < 32u; ++j) q[j] = int(BYTE_AT(w, boff + 2u + j) << 24) >> 24;
#else
    for (uint j = 0; j < 16u; ++j) {
      const uint byte = BYTE_AT(w, boff + 2u + j);
      q[j] = int(byte & 15u) - 8;        // low nibbles: values 0..15
      q[j + 16u] = int(byte >> 4) - 8;   // high nibbles: values 16..31
    }
#endif
    for (uint r = 0; r < nr; ++r) {
      const uint xb = ((r0 + r) * nb + b) * 8u;
      int s = 0;
      for (uint k = 0; k < 8u; ++k) {
        const int word = int(x[xb + k]);
        s += q[4u * k] * bitfieldExtract(word, 0, 8) + q[4u * k + 1u] * bitfieldExtract(word, 8, 8) +
             q[4u * k + 2u] * bitfieldExtract(word, 16, 8) + q[4u * k + 3u] * bitfieldExtract(word, 24, 8);
      }
      acc[r] += float(s) * (dw * xs[(r0 + r) * nb + b]);
    }
  }
#endif

  for (uint r = 0; r < TILE; ++r) partial[r][tid] = acc[r];
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s)
      for (uint r = 0; r < TILE; ++r) partial[r][tid] += partial[r][tid + s];
    barrier();
  }
  if (tid < nr) y[(r0 + tid) * p.y_stride + p.o0 + o] = partial[tid][0];
}
