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
// gdn_scan.comp, ops.h record_gdn_causal). One workgroup of 64 per value head; each invocation owns rows j = tid, tid + 64, ... (rows
// are independent given q and k, which sit in shared memory per token). The state stays in the
// buffer: d x d floats per head is too much for registers at d = 128.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Conv { float cv[]; };   // [n_tokens][conv_stride]
layout(std430, binding = 1) readonly buffer Alpha { float al[]; };  // [n_tokens][gate_stride]
layout(std430, binding = 2) readonly buffer Beta { float be[]; };   // [n_tokens][gate_stride]
layout(std430, binding = 3) readonly buffer Params { float prm[]; };  // dt_bias [Hv], then a [Hv]
layout(std430, binding = 4) buffer S { float s[]; };                // [Hv][d][d]
#if defined(REVERSE)
layout(std430, binding = 5) buffer O { float o[]; };                // o_rev is added
#else
layout(std430, binding = 5) writeonly buffer O { float o[]; };
#endif      // [n_tokens][o_stride], head h at h * d

layout(push_constant) uniform Push {
  uint d;  // <= 256
  uint n_k_heads, n_v_heads;
  uint n_tokens;
  uint conv_stride, gate_stride, o_stride;
  float scale;
  uint first;  // the first token's row
} p;

const uint WG = 64;
shared float qs[256];
shared float ks[256];

void main() {
  const uint h = gl_WorkGroupID.x;
  const uint tid = gl_LocalInvocationID.x;
  const uint d = p.d;
  const uint kh = h % p.n_k_heads;
  const uint sb = h * d * d;
#if defined(REVERSE)
  for (uint j = tid; j < d; j += WG)
    for (uint i = 0; i < d; ++i) s[sb + j * d + i] = 0.0;
  for (uint tt = p.n_tokens; tt > 0u; --tt) {
    const uint t = p.first + tt - 1u;
#else
  for (uint t = p.first; t < p.first + p.n_tokens; ++t) {
#endif
    const uint row = t * p.conv_stride;
    barrier();  // the previous token's q, k are no longer read
    for (uint i = tid; i < d; i += WG) {
      qs[i] = cv[row + kh * d + i];
      ks[i] = cv[row + (p.n_k_heads + kh) * d + i];
    }
    barrier();
    const float x = al[t * p.gate_stride + h] + prm[h];
    const float sp = x > 20.0 ? x : log(1.0 + exp(x));
    const float decay = exp(sp * prm[p.n_v_heads + h]);
    const float beta = 1.0 / (1.0 + exp(-be[t * p.gate_stride + h]));
    for (uint j = tid; j < d; j += WG) {
      const uint rj = sb + j * d;
#if defined(REVERSE)
      float sq0 = 0.0;
      for (uint i = 0; i < d; ++i) sq0 += s[rj + i] * qs[i];
      o[t * p.o_stride + h * d + j] += sq0 * p.scale;
#endif
      float sk = 0.0;
      for (uint i = 0; i < d; ++i) {
        const float v = s[rj + i] * decay;
        s[rj + i] = v;
        sk += v * ks[i];
      }
      const float delta = (cv[row + 2u * p.n_k_heads * d + h * d + j] - sk) * beta;
#if defined(REVERSE)
      for (uint i = 0; i < d; ++i) {
        precise float v = fma(ks[i], delta, s[rj + i]);
        s[rj + i] = v;
      }
#else
      float sq = 0.0;
      for (uint i = 0; i < d; ++i) {
        precise float v = fma(ks[i], delta, s[rj + i]);
        s[rj + i] = v;
        sq += v * qs[i];
      }
      o[t * p.o_stride + h * d + j] = sq * p.scale;
#endif
    }
  }
}
