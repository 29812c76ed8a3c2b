#version 450
// Groups each token's chosen experts by expert, on the device (so a pass needs no host round
// trip between routing and the expert products): the twin of the grouping in model/moe.cpp.
//   count[e]  rows routed to expert e;  first[e] = sum of count[e'] for e' < e
//   token[row] the token of routed row `row`; rows of an expert in (token, slot) order
//   row_of[t * k + j] the routed row of token t's slot j (the combine step reads it)
//   n_active, active[] the experts with routed rows, ascending, then -1 up to n_expert entries (the
//                     expert matmuls launch a workgroup row per active expert, not per expert)
// Layout of the output, ints: count [n_expert] | first [n_expert] | token [tokens * k] | row_of [tokens * k] |
// n_active [1] | active [n_expert].
// One workgroup, in shared memory, with integers only, so every output is the serial order's:
// the counts by shared atomics (a sum: any order), first[] and the active list by a workgroup scan
// over the experts, and each routed entry's rank among its expert's entries (its row's offset
// from first[e]) by counting the entries before it: in earlier chunks of WG entries (a cursor per
// expert) and in its own chunk (the invocations before it).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Ids { int ids[]; };  // [tokens][k]
layout(std430, binding = 1) writeonly buffer Groups { int grp[]; };

layout(push_constant) uniform Push {
  uint n_expert;  // <= MAX_E (moe_router.comp's bound)
  uint k;
  uint tokens;
} p;

const uint WG = 256;
const uint MAX_E = 512;
const uint PER = MAX_E / WG;  // experts per invocation in the scan
shared int count[MAX_E];      // rows per expert; then the cursor: entries of earlier chunks
shared int first[MAX_E];
shared ivec2 scan[WG];        // (rows, active experts) of each invocation's experts, scanned
shared int chunk[WG];         // the experts of the entries of the current chunk

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint ne = p.n_expert, n = p.tokens * p.k;
  for (uint e = tid; e < ne; e += WG) count[e] = 0;
  barrier();
  for (uint i = tid; i < n; i += WG) atomicAdd(count[ids[i]], 1);
  barrier();

  // Exclusive scan over experts in runs of PER per invocation: first[] and the active list.
  ivec2 own = ivec2(0);
  for (uint j = 0; j < PER; ++j) {
    const uint e = tid * PER + j;
    if (e < ne) own += ivec2(count[e], count[e] > 0 ? 1 : 0);
  }
  scan[tid] = own;
  barrier();
  for (uint off = 1u; off < WG; off <<= 1) {
    const ivec2 add = tid >= off ? scan[tid - off] : ivec2(0);
    barrier();
    scan[tid] += add;
    barrier();
  }
  ivec2 at = scan[tid] - own;  // rows and active experts before this invocation's experts
  const int n_active = scan[WG - 1u].y;
  const uint act = 2u * ne + 2u * n;
  for (uint j = 0; j < PER; ++j) {
    const uint e = tid * PER + j;
    if (e >= ne) break;
    first[e] = at.x;
    grp[e] = count[e];
    grp[ne + e] = at.x;
    if (count[e] > 0) grp[act + 1u + uint(at.y++)] = int(e);
    at.x += count[e];
  }
  for (uint j = uint(n_active) + tid; j < ne; j += WG) grp[act + 1u + j] = -1;
  if (tid == 0u) grp[act] = n_active;
  barrier();
  for (uint e = tid; e < ne; e += WG) count[e] = 0;
  barrier();

  // Rows in (token, slot) order, WG entries at a time.
  for (uint c0 = 0u; c0 < n; c0 += WG) {
    const uint i = c0 + tid;
    const int e = i < n ? ids[i] : -1;
    chunk[tid] = e;
    barrier();
    if (i < n) {
      int before = count[e];
      for (uint j = 0u; j < tid; ++j) before += chunk[j] == e ? 1 : 0;
      const int row = first[e] + before;
      grp[2u * ne + uint(row)] = int(i / p.k);
      grp[2u * ne + n + i] = row;
    }
    barrier();
    if (i < n) atomicAdd(count[e], 1);
    barrier();
  }
}
