#version 450
// Selection on the device: the twin of sampling::select_top_ref (src/backend/row_top.h). Per row
// of logits: the first maximum, the sum over the other entries of exp(x - max) (the log-softmax
// normaliser, as a float sum here; the host takes its log1p in double), and the k best entries in
// (logit descending, id ascending) order. NaN entries are skipped. A decoder reads back these
// 16 + 8k bytes per row instead of n floats.
//
// One workgroup of 256 per row. Round 0 finds the maximum: each invocation keeps the best of every
// 256th entry, a shared-memory tree keeps the better of two (larger logit, or equal logit and the
// lower id: a strict order, so every round's winner is unique). Round r > 0 does the same over the
// entries that come after round r-1's winner in that order. k rounds for k entries.
// No subgroup operations: the result does not depend on the subgroup size.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
// [rows][4 + 2k] words: max (float bits), rest (float bits), n, 0, then (id, logit bits) pairs.
layout(std430, binding = 1) writeonly buffer Out { uint o[]; };

layout(push_constant) uniform Push {
  uint n;       // entries per row
  uint stride;  // floats between rows
  uint k;       // entries to keep, <= 64
} p;

const uint WG = 256;
const uint NONE = 0xffffffffu;
shared float sv[WG];
shared uint si[WG];
shared float ssum[WG];

bool before(float va, uint ia, float vb, uint ib) { return ib == NONE || va > vb || (va == vb && ia < ib); }

// The best entry of the row after (bv, bi) in the order (all entries when bi == NONE), in sv[0], si[0].
void best_after(uint base, uint tid, float bv, uint bi) {
  float mv = 0.0;
  uint mi = NONE;
  for (uint i = tid; i < p.n; i += WG) {
    const float v = x[base + i];
    if (isnan(v)) continue;
    if (bi != NONE && !(v < bv || (v == bv && i > bi))) continue;  // not after the previous winner
    if (before(v, i, mv, mi)) {
      mv = v;
      mi = i;
    }
  }
  sv[tid] = mv;
  si[tid] = mi;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s && si[tid + s] != NONE && before(sv[tid + s], si[tid + s], sv[tid], si[tid])) {
      sv[tid] = sv[tid + s];
      si[tid] = si[tid + s];
    }
    barrier();
  }
}

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint tid = gl_LocalInvocationID.x;
  const uint base = row * p.stride;
  const uint out0 = row * (4u + 2u * p.k);

  best_after(base, tid, 0.0, NONE);
  const float m = sv[0];
  const uint arg = si[0];
  barrier();
  // The normaliser: every entry but the first maximum (an all -inf row has none: 0).
  float acc = 0.0;
  if (arg != NONE && !isinf(m)) {
    for (uint i = tid; i < p.n; i += WG) {
      const float v = x[base + i];
      if (i != arg && !isnan(v)) acc += exp(v - m);
    }
  }
  ssum[tid] = acc;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (tid < s) ssum[tid] += ssum[tid + s];
    barrier();
  }
  const bool any = arg != NONE;
  // The CPU's rule: an all -inf row has no maximum; its max is -inf and its normaliser 0.
  const float max_out = any && !(isinf(m) && m < 0.0) ? m : -1.0 / 0.0;
  if (tid == 0u) {
    o[out0] = floatBitsToUint(max_out);
    o[out0 + 1u] = floatBitsToUint(ssum[0]);
    o[out0 + 3u] = 0u;
    if (any) {
      o[out0 + 4u] = arg;
      o[out0 + 5u] = floatBitsToUint(m);
    }
  }
  uint found = any ? 1u : 0u;
  float bv = m;
  uint bi = arg;
  for (uint r = 1u; r < p.k && found == r; ++r) {
    barrier();
    best_after(base, tid, bv, bi);
    bv = sv[0];
    bi = si[0];
    if (bi != NONE) {
      if (tid == 0u) {
        o[out0 + 4u + 2u * r] = bi;
        o[out0 + 5u + 2u * r] = floatBitsToUint(bv);
      }
      found = r + 1u;
    }
  }
  if (tid == 0u) o[out0 + 2u] = found;
}
