#version 450
// y = W x for a chunk of weight rows: the twin of kernels::matmul_ref (src/kernels/matmul.h)
// and, with EXPERTS, of kernels::matmul_selected as the MoE layer uses it (model/moe.cpp). One
// variant per weight type: WTYPE_F32, WTYPE_F16, WTYPE_BF16 (widened with a shift: no device
// bf16 support needed), WTYPE_Q8_0, WTYPE_Q4_0.
//
// Dense grid: x = output row within the chunk (the host splits W into chunks that fit one
// binding and 65,535 workgroups), y = tile of 8 activation rows.
// EXPERTS grid: x = output row, y = expert within the chunk of experts; the workgroup walks the
// rows routed to its expert (groups from moe_group.comp, on the device: no host round trip) in
// tiles of 8, so an expert's weights are read once per 8 routed rows, and an expert nobody
// chose costs one early exit.
//
// Each of the 64 invocations takes every 64th element (float weights) or block of 32 (quantised
// weights) of the row; the partial sums meet in a shared-memory tree (no subgroup operations:
// the result does not depend on the subgroup size).
//
// Activations are rounded as the CPU rounds them: F16 / BF16 weights see fp16- / bf16-rounded
// activations;
// Q8_0/Q4_0 weights see Q8_0 blocks made by quantize_q8_0_activation.comp (integer products per
// block, then d_w * d_x * sum as float).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
// Float weights: x is [rows][x_stride] floats. Quantised: x is [rows][nb][8] words of int8
// quants and xs [rows][nb] float scales.
layout(std430, binding = 1) readonly buffer Acts { uint x[]; };
layout(std430, binding = 2) readonly buffer ActScales { float xs[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };
#if defined(EXPERTS)
// count [n_expert], first [n_expert], token of each routed row [rows], row of each (token, slot).
layout(std430, binding = 4) readonly buffer Groups { int grp[]; };
#endif

layout(push_constant) uniform Push {
  uint rows;      // weight rows in this chunk (per expert with EXPERTS)
  uint cols;
  uint n_act;     // activation rows (dense)
  uint w_base;    // byte offset of the chunk's first row inside the W binding
  uint w_stride;  // bytes between weight rows
  uint x_stride;  // floats between activation rows (float weights)
  uint y_stride;  // floats between output rows: y[r * y_stride + o0 + o]
  uint o0;        // first output index of the chunk
  uint e0;            // EXPERTS: first expert of the chunk
  uint n_expert;      // EXPERTS: experts in the groups buffer
  uint expert_stride; // EXPERTS: bytes between experts' matrices
  uint gather;        // EXPERTS: 1: activation row = token of the routed row; 0: the routed row
} p;

const uint WG = 64;
const uint TILE = 8;
shared float partial[TILE][WG];

// Adds W row (at byte row_off) . activation row act[r] into acc[r] for r < nr.
void dot_rows(uint row_off, uint act[TILE], uint nr, inout float acc[TILE]) {
  const uint tid = gl_LocalInvocationID.x;
#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
  for (uint i = tid; i < p.cols; i += WG) {
#if defined(WTYPE_F32)
    const float wv = uintBitsToFloat(w[(row_off >> 2) + i]);
#elif defined(WTYPE_BF16)
    const float wv = uintBitsToFloat(U16_AT(w, row_off + 2u * i) << 16);
#else
    const float wv = f16_to_f32(U16_AT(w, row_off + 2u * i));
#endif
    // Constant trip counts, so the compiler unrolls and keeps acc[] in registers (a loop to nr
    // indexes the array dynamically, which LLVM-based drivers spill to memory).
    for (uint r = 0; r < TILE; ++r) {
      if (r < nr) {
        float xv = uintBitsToFloat(x[act[r] * p.x_stride + i]);
#if defined(WTYPE_F16)
        xv = round_f16(xv);
#elif defined(WTYPE_BF16)
        xv = round_bf16(xv);
#endif
        acc[r] += wv * xv;
      }
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
    for (uint r = 0; r < TILE; ++r) {
      if (r >= nr) break;
      const uint xb = (act[r] * nb + b) * 8u;
      int s = 0;
      for (uint k = 0; k < 8u; ++k) {
        const int word = int(x[xb + k]);
        s += q[4u * k] * bitfieldExtract(word, 0, 8) + q[4u * k + 1u] * bitfieldExtract(word, 8, 8) +
             q[4u * k + 2u] * bitfieldExtract(word, 16, 8) + q[4u * k + 3u] * bitfieldExtract(word, 24, 8);
      }
      acc[r] += float(s) * (dw * xs[act[r] * nb + b]);
    }
  }
#endif
}

// The tree over the workgroup's partial sums; output row r of the tile goes to y row dst[r].
void reduce_store(float acc[TILE], uint dst[TILE], uint nr, uint o) {
  const uint tid = gl_LocalInvocationID.x;
  for (uint r = 0; r < TILE; ++r) partial[r][tid] = acc[r];
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s)
      for (uint r = 0; r < TILE; ++r) partial[r][tid] += partial[r][tid + s];
    barrier();
  }
  if (tid < nr) y[dst[tid] * p.y_stride + p.o0 + o] = partial[tid][0];
  barrier();  // partial[] is reused by the next tile
}

void main() {
  const uint o = gl_WorkGroupID.x;
  uint act[TILE], dst[TILE];
  float acc[TILE];
#if defined(EXPERTS)
  const uint e = p.e0 + gl_WorkGroupID.y;
  const int count = grp[e], first = grp[p.n_expert + e];
  const uint row_off = p.w_base + gl_WorkGroupID.y * p.expert_stride + o * p.w_stride;
  for (uint r0 = 0; r0 < uint(count); r0 += TILE) {
    const uint nr = min(TILE, uint(count) - r0);
    for (uint r = 0; r < TILE; ++r) {
      const uint row = uint(first) + r0 + min(r, nr - 1u);
      dst[r] = row;
      act[r] = p.gather != 0u ? uint(grp[2u * p.n_expert + row]) : row;
      acc[r] = 0.0;
    }
    dot_rows(row_off, act, nr, acc);
    reduce_store(acc, dst, nr, o);
  }
#else
  const uint r0 = gl_WorkGroupID.y * TILE;
  const uint nr = min(TILE, p.n_act - r0);
  for (uint r = 0; r < TILE; ++r) {
    act[r] = r0 + min(r, nr - 1u);
    dst[r] = act[r];
    acc[r] = 0.0;
  }
  dot_rows(p.w_base + o * p.w_stride, act, nr, acc);
  reduce_store(acc, dst, nr, o);
#endif
}
