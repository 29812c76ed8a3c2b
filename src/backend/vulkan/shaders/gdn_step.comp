#version 450
// The gated delta rule over a run of tokens, for every value head: the twin of
// kernels::gdn_step_ref (src/kernels/gdn.h) driven as Forward::gdn_layer does (model/gdn.cpp),
// with the gates computed here from the raw projections:
//   g = softplus(alpha[t][h] + dt_bias[h]) * a[h],  decay = exp(g),  beta = sigmoid(b[t][h])
//   per row j of S_h (S[j][i] = S_h[i][j], d x d):  S_j = decay S_j;  delta = (v_j - S_j . k) beta;
//                                                   S_j += delta k;  o_j = (S_j . q) scale
// q, k, v come from the conv output: q of key head kh = h mod n_k_heads at kh * d, k at
// (n_k_heads + kh) * d, v at 2 * n_k_heads * d + h * d of each token's row.
//
// With REVERSE: the reverse in-block path of a denoising pass (CLOVER-SPEC 3.3), the twin of
// kernels::gdn_step_reverse_ref as backend/cpu/gdn.cpp drives it: alpha, beta and params are the
// ssm_rev_* gates, the state R starts at zero (the buffer is scratch), the tokens run from last to
// first, and each token's output is ADDED to o before R takes the token in:
//   o_j += (R_j . q) scale;  R_j = decay R_j;  R_j += (v_j - R_j . k) beta k
//
// Tokens first .. first + n_tokens - 1 of the bound rows (a causal pass may hand a middle run to
// gdn_scan.comp, ops.h record_gdn_causal).
//
// Layout (parallel over the state, which stays in registers for the whole run of tokens): a
// workgroup of 64 holds RPW = 4 rows j of one value head's state (grid x: rows / 4, grid y: the
// value head); each row is shared by TPR = 16 invocations, lane l holding S_j[i] for
// i = l, l + 16, l + 32, ... (up to MAXC = 16 values: d <= 256). The dot products over i are a
// per-invocation sum over its values, then the row's 16 partial sums added in lane order through
// shared memory (every invocation of the row adds the same 16 values in the same order, so all
// hold the same sum). Two barriers per token; a d = 128 head is 32 workgroups, so a decode step of
// 32 value heads launches 1,024 workgroups instead of 32 serial ones, and the state is read and
// written once per run of tokens, not three times per token. (The sums are ordered differently
// from kernels::gdn_step_ref's sequential ones: same values to rounding, NMSE ~1e-14.)
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Conv { float cv[]; };   // [n_tokens][conv_stride]
layout(std430, binding = 1) readonly buffer Alpha { float al[]; };  // [n_tokens][gate_stride]
layout(std430, binding = 2) readonly buffer Beta { float be[]; };   // [n_tokens][gate_stride]
layout(std430, binding = 3) readonly buffer Params { float prm[]; };  // dt_bias [Hv], then a [Hv]
#if defined(REVERSE)
layout(std430, binding = 4) readonly buffer S { float s[]; };       // scratch, not used: R starts at zero
layout(std430, binding = 5) buffer O { float o[]; };                // o_rev is added
#else
layout(std430, binding = 4) buffer S { float s[]; };                // [Hv][d][d]
layout(std430, binding = 5) writeonly buffer O { float o[]; };      // [n_tokens][o_stride], head h at h * d
#endif

layout(push_constant) uniform Push {
  uint d;  // <= 256
  uint n_k_heads, n_v_heads;
  uint n_tokens;
  uint conv_stride, gate_stride, o_stride;
  float scale;
  uint first;  // the first token's row
} p;

const uint TPR = 16;   // invocations per state row
const uint RPW = 4;    // state rows per workgroup (ops.cpp kGdnStepRowsPerGroup)
const uint MAXC = 16;  // values of a row per invocation: d <= TPR x MAXC
shared float red0[TPR * RPW];
shared float red1[TPR * RPW];

// The sum of the row's 16 partials in red[], in lane order.
float row_sum(uint rbase, bool second) {
  float acc = 0.0;
  for (uint l = 0; l < TPR; ++l) acc += second ? red1[rbase + l] : red0[rbase + l];
  return acc;
}

void main() {
  const uint h = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;
  const uint lane = tid % TPR, rbase = (tid / TPR) * TPR;
  const uint d = p.d;
  const uint j = gl_WorkGroupID.x * RPW + tid / TPR;  // this invocation's state row
  const bool valid = j < d;                            // rows past d compute zeros, store nothing
  const uint kh = h % p.n_k_heads;
  const uint srow = h * d * d + min(j, d - 1u) * d;
  float st[MAXC];
  for (uint c = 0; c < MAXC; ++c) {
#if defined(REVERSE)
    st[c] = 0.0;
#else
    const uint i = lane + TPR * c;
    st[c] = valid && i < d ? s[srow + i] : 0.0;
#endif
  }
#if defined(REVERSE)
  for (uint tt = p.n_tokens; tt > 0u; --tt) {
    const uint t = p.first + tt - 1u;
#else
  for (uint t = p.first; t < p.first + p.n_tokens; ++t) {
#endif
    const uint row = t * p.conv_stride;
    const float x = al[t * p.gate_stride + h] + prm[h];
    const float sp = x > 20.0 ? x : log(1.0 + exp(x));
    const float decay = exp(sp * prm[p.n_v_heads + h]);
    const float beta = 1.0 / (1.0 + exp(-be[t * p.gate_stride + h]));
    const float vj = cv[row + 2u * p.n_k_heads * d + h * d + min(j, d - 1u)];
    float kk[MAXC], qq[MAXC];
    for (uint c = 0; c < MAXC; ++c) {
      const uint i = lane + TPR * c;
      kk[c] = i < d ? cv[row + (p.n_k_heads + kh) * d + i] : 0.0;
      qq[c] = i < d ? cv[row + kh * d + i] : 0.0;
    }
#if defined(REVERSE)
    // o_j += (R_j . q) scale with R before this token; then R_j = decay R_j, sk = R_j . k.
    float pq = 0.0, pk = 0.0;
    for (uint c = 0; c < MAXC; ++c) {
      pq += st[c] * qq[c];
      const float v = st[c] * decay;
      st[c] = v;
      pk += v * kk[c];
    }
    red0[tid] = pq;
    red1[tid] = pk;
    barrier();
    const float sq0 = row_sum(rbase, false), sk = row_sum(rbase, true);
    if (valid && lane == 0u) o[t * p.o_stride + h * d + j] += sq0 * p.scale;
    const float delta = (vj - sk) * beta;
    for (uint c = 0; c < MAXC; ++c) {
      precise float v = fma(kk[c], delta, st[c]);
      st[c] = v;
    }
    barrier();  // red0 and red1 are read before the next token writes them
#else
    float pk = 0.0;
    for (uint c = 0; c < MAXC; ++c) {
      const float v = st[c] * decay;
      st[c] = v;
      pk += v * kk[c];
    }
    red0[tid] = pk;
    barrier();
    const float delta = (vj - row_sum(rbase, false)) * beta;
    float pq = 0.0;
    for (uint c = 0; c < MAXC; ++c) {
      precise float v = fma(kk[c], delta, st[c]);
      st[c] = v;
      pq += v * qq[c];
    }
    // red1 of the previous token was read before this token's first barrier, and red0 is written
    // again only after the barrier below: two barriers per token.
    red1[tid] = pq;
    barrier();
    if (valid && lane == 0u) o[t * p.o_stride + h * d + j] = row_sum(rbase, true) * p.scale;
#endif
  }
#if !defined(REVERSE)
  for (uint c = 0; c < MAXC; ++c) {
    const uint i = lane + TPR * c;
    if (valid && i < d) s[srow + i] = st[c];
  }
#endif
}
