#version 450
// MoE routing of each token, the twin of the routing in model/moe.cpp: p = softmax(logits) over
// the n_expert experts; the k largest p, ties to the lower expert id (an insertion in id order,
// as the CPU does it); weights p_e / max(sum of the chosen p, 2^-14). One workgroup per token:
// the softmax is a shared-memory max and sum tree, the selection one invocation's loop (k <= 16
// over at most 512 experts: a few thousand comparisons).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) writeonly buffer Ids { int ids[]; };         // [token][k]
layout(std430, binding = 2) writeonly buffer Weights { float wts[]; };   // [token][k]

layout(push_constant) uniform Push {
  uint n_expert;  // <= 512
  uint k;         // <= 16
  uint stride;    // floats between logit rows
} p;

const uint WG = 64;
shared float prob[512];
shared float red[WG];

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
  if (tid != 0u) return;

  int ch[16];
  for (uint j = 0; j < p.k; ++j) ch[j] = -1;
  for (uint e = 0; e < p.n_expert; ++e) {
    uint pos = p.k;
    while (pos > 0u && (ch[pos - 1u] < 0 || prob[e] > prob[ch[pos - 1u]])) --pos;
    if (pos < p.k) {
      for (uint j = p.k - 1u; j > pos; --j) ch[j] = ch[j - 1u];
      ch[pos] = int(e);
    }
  }
  float wsum = 0.0;
  for (uint j = 0; j < p.k; ++j) wsum += prob[ch[j]];
  wsum = max(wsum, 6.103515625e-5);
  for (uint j = 0; j < p.k; ++j) {
    ids[t * p.k + j] = ch[j];
    wts[t * p.k + j] = prob[ch[j]] / wsum;
  }
}
