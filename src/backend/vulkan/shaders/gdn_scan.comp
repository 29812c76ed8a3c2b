#version 450
// The gated delta rule over a run of tokens in chunks of L = 64 (the chunkwise "WY" form used for
// prefill), for every value head: the same recurrence as gdn_step.comp (its twin, and through it
// kernels::gdn_step_ref), computed with products inside a chunk and the state carried between
// chunks. Gates as in gdn_step.comp: g = softplus(alpha + dt_bias) * a (log decay), beta = sigmoid(b).
//
// With S (d_v x d_k, row j = value dim j, as the buffer stores it), the step is
//   S_t = a_t S_{t-1} + u_t k_t^T,   u_t = beta_t (v_t - a_t S_{t-1} k_t),   o_t = scale S_t q_t.
// Inside a chunk of n <= L tokens from state S0, with G_t = g_0 + ... + g_t (cumulative log decay)
// and every decay ratio written exp(G_t - G_s) (<= 1 for s <= t: no overflow, underflow is 0):
//   u_t + sum_{s<t} A_ts u_s = beta_t (v_t - exp(G_t) S0 k_t),   A_ts = beta_t exp(G_t - G_s) (k_t . k_s)
//       (unit lower triangular: U by forward substitution, one value column per invocation)
//   o_t = scale (exp(G_t) S0 q_t + sum_{s<=t} B_ts u_s),          B_ts = exp(G_t - G_s) (q_t . k_s)
//   S_n = exp(G_{n-1}) S0 + sum_s exp(G_{n-1} - G_s) u_s k_s^T
// The state is read three times and written once per chunk instead of twice each per token; the
// rest is L x L x d and L x d x d products (docs/vulkan.md has the FLOP and byte count).
//
// Grid: x = blocks of VB = 32 value rows of a head (the rows of S are independent given q and k,
// so each block is its own problem; A and B are recomputed per block), y = value heads. Tokens
// first .. first + n_tokens - 1 of the bound rows. Shared memory: A then B (L x L), U (L x VB),
// the gates and slices of 8 dims of q and k: 29 KiB, under lavapipe's 32 KiB. No subgroup
// operations: results do not depend on the subgroup size.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Conv { float cv[]; };   // [tokens][conv_stride]
layout(std430, binding = 1) readonly buffer Alpha { float al[]; };  // [tokens][gate_stride]
layout(std430, binding = 2) readonly buffer Beta { float be[]; };   // [tokens][gate_stride]
layout(std430, binding = 3) readonly buffer Params { float prm[]; };  // dt_bias [Hv], then a [Hv]
layout(std430, binding = 4) coherent buffer S { float s[]; };       // [Hv][d][d]
layout(std430, binding = 5) writeonly buffer O { float o[]; };      // [tokens][o_stride], head h at h * d

layout(push_constant) uniform Push {
  uint d;  // <= 256
  uint n_k_heads, n_v_heads;
  uint n_tokens;
  uint conv_stride, gate_stride, o_stride;
  float scale;
  uint first;  // the first token's row
} p;

const uint WG = 64;
const uint L = 64;
const uint VB = 32;
shared float mat[L * L];  // A (strictly lower), then B (lower, diagonal included); [t][s]
shared float ub[L * VB];  // the right-hand sides, then U; [t][jj]
shared float gc[L];       // G_t
shared float bt[L];       // beta_t
shared float wl[L];       // exp(G_{n-1} - G_t)
shared float xs[L * 8];   // a slice of 8 dims of the chunk's q or k rows, [t][8]
shared float ks[L * 8];   // the same slice of its k rows

// mat[t][s] for the chunk's n tokens: A (WITH_BETA: beta_t e^{G_t - G_s} (k_t . k_s), s < t) or B
// (e^{G_t - G_s} (q_t . k_s), s <= t), 0 elsewhere. Invocation tid owns column s = tid (L = WG)
// and keeps the column's L dot products in registers, over slices of 8 dims staged in shared
// memory: each product reads a broadcast value and one of its own (no per-lane gathers).
void chunk_products(const uint r0, const uint n, const uint x_at, const uint k_at, const bool with_beta) {
  const uint tid = gl_LocalInvocationID.x;
  float acc[L];
  for (uint t = 0; t < L; ++t) acc[t] = 0.0;
  for (uint i0 = 0; i0 < p.d; i0 += 8u) {
    barrier();  // the previous slice is read
    for (uint e = tid; e < L * 8u; e += WG) {
      const uint t = e / 8u, i = i0 + e % 8u;
      const bool inside = t < n && i < p.d;
      const uint row = (r0 + t) * p.conv_stride;
      xs[e] = inside ? cv[row + x_at + i] : 0.0;
      ks[e] = inside ? cv[row + k_at + i] : 0.0;
    }
    barrier();
    float own[8];
    for (uint i = 0; i < 8u; ++i) own[i] = ks[tid * 8u + i];
    for (uint t = 0; t < L; ++t) {
      float a = acc[t];
      for (uint i = 0; i < 8u; ++i) a += xs[t * 8u + i] * own[i];
      acc[t] = a;
    }
  }
  for (uint t = 0; t < L; ++t) {
    const bool live = t < n && (with_beta ? tid < t : tid <= t);
    mat[t * L + tid] = live ? (with_beta ? bt[t] : 1.0) * exp(gc[t] - gc[tid]) * acc[t] : 0.0;
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint h = gl_WorkGroupID.y;
  const uint d = p.d;
  const uint j0 = gl_WorkGroupID.x * VB;
  const uint nj = min(VB, d - j0);
  const uint kh = h % p.n_k_heads;
  const uint sb = h * d * d;
  const uint q_at = kh * d, k_at = (p.n_k_heads + kh) * d, v_at = 2u * p.n_k_heads * d + h * d;

  for (uint c0 = 0; c0 < p.n_tokens; c0 += L) {
    const uint n = min(L, p.n_tokens - c0);
    const uint r0 = p.first + c0;  // row of the chunk's first token
    if (tid < n) {
      const uint t = r0 + tid;
      const float x = al[t * p.gate_stride + h] + prm[h];
      const float sp = x > 20.0 ? x : log(1.0 + exp(x));
      gc[tid] = sp * prm[p.n_v_heads + h];
      bt[tid] = 1.0 / (1.0 + exp(-be[t * p.gate_stride + h]));
    }
    barrier();
    if (tid == 0)
      for (uint t = 1; t < n; ++t) gc[t] += gc[t - 1];
    barrier();
    if (tid < n) wl[tid] = exp(gc[n - 1] - gc[tid]);

    // A, and the right-hand sides beta_t (v_t - exp(G_t) S0_j . k_t).
    chunk_products(r0, n, k_at, k_at, true);
    for (uint e = tid; e < n * VB; e += WG) {
      const uint t = e / VB, jj = e % VB;
      if (jj >= nj) continue;
      const uint row = (r0 + t) * p.conv_stride, sj = sb + (j0 + jj) * d;
      float sk = 0.0;
      for (uint i = 0; i < d; ++i) sk += s[sj + i] * cv[row + k_at + i];
      ub[e] = bt[t] * (cv[row + v_at + j0 + jj] - exp(gc[t]) * sk);
    }
    barrier();

    // U = (I + A)^-1 rhs, a column per invocation.
    if (tid < nj)
      for (uint t = 1; t < n; ++t) {
        float u = ub[t * VB + tid];
        for (uint sx = 0; sx < t; ++sx) u -= mat[t * L + sx] * ub[sx * VB + tid];
        ub[t * VB + tid] = u;
      }
    barrier();

    // B over A's storage, then the outputs from S0 and U.
    chunk_products(r0, n, q_at, k_at, false);
    barrier();
    for (uint e = tid; e < n * VB; e += WG) {
      const uint t = e / VB, jj = e % VB;
      if (jj >= nj) continue;
      const uint row = (r0 + t) * p.conv_stride, sj = sb + (j0 + jj) * d;
      float sq = 0.0;
      for (uint i = 0; i < d; ++i) sq += s[sj + i] * cv[row + q_at + i];
      float acc = exp(gc[t]) * sq;
      for (uint sx = 0; sx <= t; ++sx) acc += mat[t * L + sx] * ub[sx * VB + jj];
      o[(r0 + t) * p.o_stride + h * d + j0 + jj] = acc * p.scale;
    }
    // Every read of S0 is done before it is overwritten.
    memoryBarrierBuffer();
    barrier();

    // S = exp(G_{n-1}) S0 + sum_s exp(G_{n-1} - G_s) u_s k_s^T, an element per invocation.
    const float decay = exp(gc[n - 1]);
    for (uint e = tid; e < nj * d; e += WG) {
      const uint jj = e / d, i = e % d;
      const uint at = sb + (j0 + jj) * d + i;
      float acc = decay * s[at];
      for (uint sx = 0; sx < n; ++sx) acc += wl[sx] * ub[sx * VB + jj] * cv[(r0 + sx) * p.conv_stride + k_at + i];
      s[at] = acc;
    }
    // The next chunk reads the new state (other invocations' elements) and reuses the shared arrays.
    memoryBarrierBuffer();
    barrier();
  }
}
