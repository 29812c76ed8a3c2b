#version 450
// New K or V rows into a layer's cache, in the cache's type: the twin of store_kv_row in
// backend/cpu/attention.cpp (F32 copied, F16 rounded to nearest even as kernels::fp32_to_fp16,
// Q8_0 quantised as kernels::quantize_row_q8_0_activation, in ggml blocks of 34 bytes).
//
// The cache is [n_ctx][row_bytes] with every position's row the values of all KV heads back to
// back, so the rows of positions n_past .. n_past + n_tokens - 1 are one contiguous byte range.
// One invocation per 32-bit word of that range (blocks of 34 bytes are not word aligned, and a
// word may straddle two positions): each byte of the word is computed from the floats it holds;
// bytes outside the range (the neighbouring positions' rows) are written back unchanged. No two
// invocations write the same word, so there is no race. n_past is read from a small buffer of
// pass parameters when the shader runs (word n_past_at of P), so a recorded pass stays valid as its
// sequence grows: the grid covers the most words the range can span, and the invocations past its
// end (or past the cache's) do nothing.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };  // [n_tokens][x_stride]
layout(std430, binding = 1) buffer Cache { uint c[]; };
layout(std430, binding = 2) readonly buffer P { uint params[]; };

layout(push_constant) uniform Push {
  uint row_bytes;  // bytes per position
  uint values;     // floats per position (every KV head)
  uint n_past_at;  // the word of P holding the position of the first new row
  uint n_tokens;
  uint x_stride;
  uint type;       // 0 F32, 1 F16, 8 Q8_0 (DType values)
} p;

// The byte `r` of the row of token t (0 <= r < row_bytes).
uint row_byte(uint t, uint r) {
  const uint xb = t * p.x_stride;
  if (p.type == 0u) return (floatBitsToUint(x[xb + r / 4u]) >> ((r & 3u) * 8u)) & 0xffu;
  if (p.type == 1u) return (f32_to_f16(x[xb + r / 2u]) >> ((r & 1u) * 8u)) & 0xffu;
  const uint b = r / 34u, o = r % 34u;
  const uint base = xb + b * 32u;
  float amax = 0.0;
  for (uint j = 0; j < 32u; ++j) amax = max(amax, abs(x[base + j]));
  if (o < 2u) return (f32_to_f16(amax / 127.0) >> (o * 8u)) & 0xffu;
  const float id = amax != 0.0 ? 127.0 / amax : 0.0;
  const int v = int(clamp(roundEven(x[base + o - 2u] * id), -128.0, 127.0));
  return uint(v) & 0xffu;
}

void main() {
  const uint first = params[p.n_past_at] * p.row_bytes, end = first + p.n_tokens * p.row_bytes;
  const uint w = first / 4u + gl_GlobalInvocationID.x;
  if (w * 4u >= end || w >= uint(c.length())) return;
  uint word = c[w];
  for (uint j = 0; j < 4u; ++j) {
    const uint a = w * 4u + j;
    if (a < first || a >= end) continue;
    const uint t = (a - first) / p.row_bytes, r = (a - first) % p.row_bytes;
    word = (word & ~(0xffu << (8u * j))) | (row_byte(t, r) << (8u * j));
  }
  c[w] = word;
}
