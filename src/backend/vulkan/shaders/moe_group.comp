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
// One invocation does it in order (tokens * k entries: a few thousand at most per pass), so the
// order, and with it every later sum, is the CPU's.
layout(local_size_x = 1) in;
layout(std430, binding = 0) readonly buffer Ids { int ids[]; };  // [tokens][k]
layout(std430, binding = 1) buffer Groups { int grp[]; };

layout(push_constant) uniform Push {
  uint n_expert;
  uint k;
  uint tokens;
} p;

void main() {
  const uint ne = p.n_expert, n = p.tokens * p.k;
  for (uint e = 0; e < ne; ++e) grp[e] = 0;
  for (uint i = 0; i < n; ++i) grp[ids[i]] += 1;
  int next = 0;
  for (uint e = 0; e < ne; ++e) {
    grp[ne + e] = next;
    next += grp[e];
    grp[e] = 0;  // reused as the fill cursor, restored below
  }
  for (uint i = 0; i < n; ++i) {
    const int e = ids[i];
    const int row = grp[ne + e] + grp[e];
    grp[e] += 1;
    grp[2u * ne + uint(row)] = int(i / p.k);
    grp[2u * ne + n + i] = row;
  }
  const uint act = 2u * ne + 2u * n;
  uint n_active = 0u;
  for (uint e = 0; e < ne; ++e)
    if (grp[e] > 0) grp[act + 1u + n_active++] = int(e);
  grp[act] = int(n_active);
  for (uint j = n_active; j < ne; ++j) grp[act + 1u + j] = -1;
}
