#version 450
// MoE routing of each token, the twin of the routing in model/moe.cpp: p = softmax(logits) over
// the n_expert experts; the k largest p, ties to the lower expert id (an insertion in id order,
// as the CPU does it); weights p_e / max(sum of the chosen p, 2^-14). One workgroup per token:
// the softmax is a shared-memory max and sum tree, the selection k rounds of a tree (k <= 16, at
// most 512 experts).
//
// With GROUP the pass's grouping (moe_group.glsl) is done in the same dispatch by the workgroup
// that routes last: each workgroup writes its token's ids, makes them visible (a buffer memory
// barrier; `ids` is coherent) and counts itself in `done`; the one that counts tokens - 1 sees
// every token's ids, groups them and resets `done` to 0 for the next dispatch (the executor
// zeroes it once at creation). No workgroup waits for another, so nothing depends on the order
// or concurrency in which workgroups run. One barrier level fewer per MoE layer.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;  // moe_group.glsl's GROUP_WG
layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
#if defined(GROUP)
layout(std430, binding = 1) coherent buffer Ids { int ids[]; };          // [token][k]
#else
layout(std430, binding = 1) writeonly buffer Ids { int ids[]; };         // [token][k]
#endif
layout(std430, binding = 2) writeonly buffer Weights { float wts[]; };   // [token][k]
#if defined(GROUP)
layout(std430, binding = 3) writeonly buffer Groups { int grp[]; };
layout(std430, binding = 4) coherent buffer Done { uint done[]; };       // one counter, 0 between dispatches
#endif

layout(push_constant) uniform Push {
  uint n_expert;  // <= 512
  uint k;         // <= 16
  uint stride;    // floats between logit rows
#if defined(GROUP)
  uint tokens;
#endif
} p;

#if defined(GROUP)
#include "moe_group.glsl"
shared bool last;
#endif

const uint WG = 64;
shared float prob[512];
shared float red[WG];
shared float bv[WG];
shared uint bi[WG];
shared int chosen[16];
const uint NONE = 0xffffffffu;

// Whether entry (va, ia) comes before (vb, ib): larger p, or equal p and the lower id; an empty
// slot (NONE) comes after everything.
bool before(float va, uint ia, float vb, uint ib) { return ia != NONE && (ib == NONE || va > vb || (va == vb && ia < ib)); }

void main() {
  const uint t = gl_WorkGroupID.x;
  const uint tid = gl_LocalInvocationID.x;
  const uint base = t * p.stride;
  float m = -1.0 / 0.0;
  for (uint e = tid; e < p.n_expert; e += WG) m = max(m, logits[base + e]);
  red[tid] = m;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s) red[tid] = max(red[tid], red[tid + s]);
    barrier();
  }
  const float mx = red[0];
  barrier();
  float sum = 0.0;
  for (uint e = tid; e < p.n_expert; e += WG) {
    const float v = exp(logits[base + e] - mx);
    prob[e] = v;
    sum += v;
  }
  red[tid] = sum;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    barrier();
  }
  const float inv_sum = 1.0 / red[0];
  for (uint e = tid; e < p.n_expert; e += WG) prob[e] *= inv_sum;
  barrier();
  // The k largest in (p descending, expert ascending) order: k rounds of a shared-memory tree, each
  // keeping the better of two in that strict order among the entries after the last round's winner
  // (select_top.comp's method). The same experts in the same order as the CPU's insertion in id
  // order (ties to the lower id), so the weights' sum below adds them in the CPU's order.
  float prev_v = 0.0;
  uint prev_i = NONE;
  for (uint j = 0; j < p.k; ++j) {
    float mv = 0.0;
    uint mi = NONE;
    for (uint e = tid; e < p.n_expert; e += WG) {
      const float v = isnan(prob[e]) ? -1.0 : prob[e];  // NaN below every probability: never NONE
      if (prev_i != NONE && !(v < prev_v || (v == prev_v && e > prev_i))) continue;
      if (before(v, e, mv, mi)) {
        mv = v;
        mi = e;
      }
    }
    bv[tid] = mv;
    bi[tid] = mi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
      if (tid < s && before(bv[tid + s], bi[tid + s], bv[tid], bi[tid])) {
        bv[tid] = bv[tid + s];
        bi[tid] = bi[tid + s];
      }
      barrier();
    }
    prev_v = bv[0];
    prev_i = bi[0];
    if (tid == 0u) chosen[j] = int(prev_i);
    barrier();  // every invocation has read round j's winner before round j + 1 writes the tree
  }
  if (tid == 0u) {
    float wsum = 0.0;
    for (uint j = 0; j < p.k; ++j) wsum += prob[chosen[j]];
    wsum = max(wsum, 6.103515625e-5);
    for (uint j = 0; j < p.k; ++j) {
      ids[t * p.k + j] = chosen[j];
      wts[t * p.k + j] = prob[chosen[j]] / wsum;
    }
  }
#if defined(GROUP)
  if (tid == 0u) {
    memoryBarrierBuffer();  // this token's ids before the count that announces them
    last = atomicAdd(done[0], 1u) == p.tokens - 1u;
    memoryBarrierBuffer();
  }
  barrier();
  if (!last) return;  // uniform: the whole workgroup leaves, or the whole workgroup groups
  group_rows(tid, p.n_expert, p.k, p.tokens);
  if (tid == 0u) done[0] = 0u;
#endif
}
