#version 450
// The merge of attention_split's chunks (attention.comp SPLIT): for each (token, query head) of
// the group, in chunk order,
//   M = max_c m_c,   L = sum_c l_c exp(m_c - M),   o = (sum_c out_c exp(m_c - M)) / L
// Empty chunks (m = -inf, l = 0, out = 0) add exact zeros, so a token whose keys all lie in chunk 0
// gets bitwise attention.comp's single-pass result (out_0 x 1 / l_0).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Part { float part[]; };  // [token][head][chunk][m, l, out]
layout(std430, binding = 1) writeonly buffer O { float o[]; };

layout(push_constant) uniform Push {
  uint head_dim;
  uint n_head;
  uint n_split;
  uint o_row;  // floats between tokens in o (head h at h * head_dim)
  uint t0;     // the group's first token in the pass
} p;

const uint WG = 64;

void main() {
  const uint tl = gl_WorkGroupID.x / p.n_head, h = gl_WorkGroupID.x % p.n_head;
  const uint hd = p.head_dim, stride = hd + 2u;
  const uint pb = (tl * p.n_head + h) * p.n_split * stride;
  float mx = -1.0 / 0.0;
  for (uint c = 0; c < p.n_split; ++c) mx = max(mx, part[pb + c * stride]);
  float l = 0.0;
  for (uint c = 0; c < p.n_split; ++c) l += part[pb + c * stride + 1u] * exp(part[pb + c * stride] - mx);
  const uint ob = (p.t0 + tl) * p.o_row + h * hd;
  for (uint d = gl_LocalInvocationID.x; d < hd; d += WG) {
    float a = 0.0;
    for (uint c = 0; c < p.n_split; ++c) a += part[pb + c * stride + 2u + d] * exp(part[pb + c * stride] - mx);
    o[ob + d] = a / l;
  }
}
