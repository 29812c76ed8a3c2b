// Groups each token's chosen experts by expert: the twin of the grouping in model/moe.cpp.
//   count[e]  rows routed to expert e;  first[e] = sum of count[e'] for e' < e
//   token[row] the token of routed row `row`; rows of an expert in (token, slot) order
//   row_of[t * k + j] the routed row of token t's slot j (the combine step reads it)
//   n_active, active[] the experts with routed rows, ascending, then -1 up to n_expert entries (the
//                     expert matmuls launch a workgroup row per active expert, not per expert)
// Layout of the output, ints: count [n_expert] | first [n_expert] | token [tokens * k] | row_of [tokens * k] |
// n_active [1] | active [n_expert].
// One workgroup of GROUP_WG invocations, in shared memory, with integers only, so every output is
// the serial order's: the counts by shared atomics (a sum: any order), first[] and the active
// list by a workgroup scan over the experts, and each routed entry's rank among its expert's
// entries (its row's offset from first[e]) by counting the entries before it: in earlier chunks
// of GROUP_WG entries (a cursor per expert) and in its own chunk (the invocations before it).
// The including shader declares `ids` ([tokens][k], readable) and `grp` (the output), and calls
// group_rows from every invocation of the workgroup (it has barriers). Shared by moe_group.comp
// and moe_router.comp GROUP.
const uint GROUP_WG = 64;
const uint GROUP_MAX_E = 512;                    // moe_router.comp's bound
const uint GROUP_PER = GROUP_MAX_E / GROUP_WG;   // experts per invocation in the scan
shared int g_count[GROUP_MAX_E];  // rows per expert; then the cursor: entries of earlier chunks
shared int g_first[GROUP_MAX_E];
shared ivec2 g_scan[GROUP_WG];    // (rows, active experts) of each invocation's experts, scanned
shared int g_chunk[GROUP_WG];     // the experts of the entries of the current chunk

void group_rows(uint tid, uint ne, uint k, uint tokens) {
  const uint n = tokens * k;
  for (uint e = tid; e < ne; e += GROUP_WG) g_count[e] = 0;
  barrier();
  for (uint i = tid; i < n; i += GROUP_WG) atomicAdd(g_count[ids[i]], 1);
  barrier();

  // Exclusive scan over experts in runs of GROUP_PER per invocation: first[] and the active list.
  ivec2 own = ivec2(0);
  for (uint j = 0; j < GROUP_PER; ++j) {
    const uint e = tid * GROUP_PER + j;
    if (e < ne) own += ivec2(g_count[e], g_count[e] > 0 ? 1 : 0);
  }
  g_scan[tid] = own;
  barrier();
  for (uint off = 1u; off < GROUP_WG; off <<= 1) {
    const ivec2 add = tid >= off ? g_scan[tid - off] : ivec2(0);
    barrier();
    g_scan[tid] += add;
    barrier();
  }
  ivec2 at = g_scan[tid] - own;  // rows and active experts before this invocation's experts
  const int n_active = g_scan[GROUP_WG - 1u].y;
  const uint act = 2u * ne + 2u * n;
  for (uint j = 0; j < GROUP_PER; ++j) {
    const uint e = tid * GROUP_PER + j;
    if (e >= ne) break;
    g_first[e] = at.x;
    grp[e] = g_count[e];
    grp[ne + e] = at.x;
    if (g_count[e] > 0) grp[act + 1u + uint(at.y++)] = int(e);
    at.x += g_count[e];
  }
  for (uint j = uint(n_active) + tid; j < ne; j += GROUP_WG) grp[act + 1u + j] = -1;
  if (tid == 0u) grp[act] = n_active;
  barrier();
  for (uint e = tid; e < ne; e += GROUP_WG) g_count[e] = 0;
  barrier();

  // Rows in (token, slot) order, GROUP_WG entries at a time.
  for (uint c0 = 0u; c0 < n; c0 += GROUP_WG) {
    const uint i = c0 + tid;
    const int e = i < n ? ids[i] : -1;
    g_chunk[tid] = e;
    barrier();
    if (i < n) {
      int before = g_count[e];
      for (uint j = 0u; j < tid; ++j) before += g_chunk[j] == e ? 1 : 0;
      const int row = g_first[e] + before;
      grp[2u * ne + uint(row)] = int(i / k);
      grp[2u * ne + n + i] = row;
    }
    barrier();
    if (i < n) atomicAdd(g_count[e], 1);
    barrier();
  }
}
