#version 450
// Softmax attention of query heads against a KV cache in one pass over the keys (online softmax,
// as flash attention): the twin of kernels::attention_ref (src/kernels/attention.h).
//
//   o[t, h] = sum_j softmax_j(scale * q[t, h] . k[j]) v[j]     j < n_keys(t)
//   n_keys(t) = n_past + t + 1 (causal)  or  n_past + n_tokens (a denoising block: the prefix and
//   the whole block, both directions)
//
// K and V are one layer's cache: position j of KV head g at byte j * stride + g * head_bytes,
// each of type F32 (0), F16 (1) or Q8_0 (8, ggml blocks of 34 bytes), chosen by push constant
// (a uniform branch). n_past is read from a small buffer of pass parameters when the shader runs
// (word n_past_at of P), so a recorded pass stays valid as its sequence grows. Query head h reads
// KV head h / group (GQA). The query is rounded to the K
// cache's activation type first, as the CPU does (round_query): fp16 for an F16 cache, Q8_0
// blocks (quantised and dequantised) for a Q8_0 cache.
//
// One workgroup of 64 per (token, query head). Keys go in tiles of 64, one key per invocation
// for the scores; each invocation then owns dims d = tid, tid + 64, ... (head_dim <= 256) of the
// running output, rescaled by exp(m_old - m_new) whenever the running max grows. Shared memory is
// O(head_dim + tile), independent of the context length.
//
// With SPLIT (attention_split, flash-decoding): workgroup (x, y) takes only the keys of chunk y,
// [y chunk, (y + 1) chunk) of the token's keys, and writes its unnormalised partial result (the
// running max m, the sum l, the output before the division) to `part`; attention_combine.comp
// merges a token's chunks in order. A decode step at a long context thus spreads one head's keys
// over n_split workgroups instead of walking them all in one. The chunks are absolute key
// positions, so a token's arithmetic does not depend on the pass it is in; a token with all its
// keys in chunk 0 gets bitwise the single-pass result (the merge multiplies by exp(0) = 1 and adds
// the empty chunks' zeros).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { uint kc[]; };
layout(std430, binding = 2) readonly buffer V { uint vc[]; };
layout(std430, binding = 3) writeonly buffer O { float o[]; };
layout(std430, binding = 4) readonly buffer P { uint params[]; };
#if defined(SPLIT)
// [token of the group][query head][chunk][m, l, out[head_dim]]
layout(std430, binding = 5) writeonly buffer Part { float part[]; };
#endif

layout(push_constant) uniform Push {
  uint head_dim;  // <= 256; a multiple of 32 for a Q8_0 cache
  uint n_head;    // query heads per token
  uint group;     // query heads per KV head
  uint q_row;     // floats between tokens in q (query head h at h * q_head)
  uint q_head;
  uint o_row;     // floats between tokens in o (head h at h * head_dim)
  uint k_stride, k_head_bytes, k_type;
  uint v_stride, v_head_bytes, v_type;
  uint n_past_at;  // the word of P holding n_past
  uint n_tokens;
  uint causal;
  float scale;
  uint t0;       // the first query token of this dispatch (its group of tokens)
  uint chunk;    // SPLIT: keys per chunk (a multiple of 64)
  uint n_split;  // SPLIT: chunks per token
} p;

const uint WG = 64;
const uint MAXD = 256;
shared float qs[MAXD];
shared float prob[WG];
shared float red[WG];

// Value `i` of the cache row at byte `off` (type F32 / F16 / Q8_0).
float cache_value(uint type, uint off, uint i, bool is_k) {
  if (type == 0u) return uintBitsToFloat(is_k ? kc[(off >> 2) + i] : vc[(off >> 2) + i]);
  if (type == 1u) return f16_to_f32(is_k ? U16_AT(kc, off + 2u * i) : U16_AT(vc, off + 2u * i));
  const uint b = off + (i / 32u) * 34u;
  const float d = f16_to_f32(is_k ? U16_AT(kc, b) : U16_AT(vc, b));
  const uint byte = is_k ? BYTE_AT(kc, b + 2u + i % 32u) : BYTE_AT(vc, b + 2u + i % 32u);
  return float(int(byte << 24) >> 24) * d;
}

float reduce_max(float v, uint tid) {
  red[tid] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s) red[tid] = max(red[tid], red[tid + s]);
    barrier();
  }
  const float r = red[0];
  barrier();
  return r;
}

float reduce_sum(float v, uint tid) {
  red[tid] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    barrier();
  }
  const float r = red[0];
  barrier();
  return r;
}

void main() {
  const uint tl = gl_WorkGroupID.x / p.n_head, h = gl_WorkGroupID.x % p.n_head;
  const uint t = p.t0 + tl;  // the token in the pass
  const uint g = h / p.group;
  const uint tid = gl_LocalInvocationID.x;
  const uint hd = p.head_dim;
  const uint n_past = params[p.n_past_at];
  const uint n_keys = p.causal != 0u ? n_past + t + 1u : n_past + p.n_tokens;
#if defined(SPLIT)
  const uint k_begin = gl_WorkGroupID.y * p.chunk, k_end = min(n_keys, k_begin + p.chunk);
  const uint pb = ((tl * p.n_head + h) * p.n_split + gl_WorkGroupID.y) * (hd + 2u);
  if (k_begin >= n_keys) {  // uniform in the workgroup: an empty chunk, before any barrier
    for (uint i = tid; i < hd + 2u; i += WG) part[pb + i] = i == 0u ? -1.0 / 0.0 : 0.0;
    return;
  }
#else
  const uint k_begin = 0u, k_end = n_keys;
#endif

  // The query, rounded as the K cache's activation type.
  const uint qb = t * p.q_row + h * p.q_head;
  for (uint i = tid; i < hd; i += WG) qs[i] = p.k_type == 1u ? round_f16(q[qb + i]) : q[qb + i];
  barrier();
  if (p.k_type == 8u) {
    // Q8_0: one invocation per block of 32, as quantize_q8_0_activation.comp rounds.
    if (tid < hd / 32u) {
      float amax = 0.0;
      for (uint j = 0; j < 32u; ++j) amax = max(amax, abs(qs[tid * 32u + j]));
      const float d = f16_to_f32(f32_to_f16(amax / 127.0));
      const float id = amax != 0.0 ? 127.0 / amax : 0.0;
      for (uint j = 0; j < 32u; ++j) qs[tid * 32u + j] = clamp(roundEven(qs[tid * 32u + j] * id), -128.0, 127.0) * d;
    }
    barrier();
  }

  float acc[MAXD / WG];
  for (uint r = 0; r < MAXD / WG; ++r) acc[r] = 0.0;
  float m = -1.0 / 0.0, l = 0.0;
  for (uint j0 = k_begin; j0 < k_end; j0 += WG) {
    const uint j = j0 + tid;
    float s = -1.0 / 0.0;
    if (j < k_end) {
      const uint off = j * p.k_stride + g * p.k_head_bytes;
      float dot = 0.0;
      for (uint i = 0; i < hd; ++i) dot += qs[i] * cache_value(p.k_type, off, i, true);
      s = dot * p.scale;
    }
    const float m_new = max(m, reduce_max(s, tid));
    const float e = j < k_end ? exp(s - m_new) : 0.0;
    prob[tid] = e;
    const float alpha = exp(m - m_new);  // 0 on the first tile (m = -inf)
    l = l * alpha + reduce_sum(e, tid);  // its barriers also publish prob[]
    m = m_new;
    const uint nj = min(WG, k_end - j0);
    for (uint r = 0; r < MAXD / WG; ++r) {
      const uint d = tid + r * WG;
      if (d >= hd) break;
      float a = acc[r] * alpha;
      for (uint jj = 0; jj < nj; ++jj)
        a += prob[jj] * cache_value(p.v_type, (j0 + jj) * p.v_stride + g * p.v_head_bytes, d, false);
      acc[r] = a;
    }
    barrier();  // prob[] is rewritten by the next tile
  }
#if defined(SPLIT)
  if (tid == 0u) {
    part[pb] = m;
    part[pb + 1u] = l;
  }
  for (uint r = 0; r < MAXD / WG; ++r) {
    const uint d = tid + r * WG;
    if (d < hd) part[pb + 2u + d] = acc[r];
  }
#else
  const uint ob = t * p.o_row + h * hd;
  for (uint r = 0; r < MAXD / WG; ++r) {
    const uint d = tid + r * WG;
    if (d < hd) o[ob + d] = n_keys > 0u ? acc[r] / l : 0.0;
  }
#endif
}
