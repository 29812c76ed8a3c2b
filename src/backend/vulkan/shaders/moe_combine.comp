#version 450
// The MoE layer's output: the routed experts' down projections weighted by the router, plus the
// shared expert gated by a sigmoid: the twin of the last loop of model/moe.cpp:
//   y[t][i] = sum_j w[t][j] * down[row_of[t * k + j]][i]  +  sigmoid(gamma[t]) * shared[t][i]
// summed in slot order from 0, as the CPU. One invocation per output value.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Down { float down[]; };     // [routed rows][n]
layout(std430, binding = 1) readonly buffer Shared { float sh[]; };     // [tokens][n]
layout(std430, binding = 2) readonly buffer Weights { float wts[]; };   // [tokens][k]
layout(std430, binding = 3) readonly buffer Groups { int grp[]; };      // moe_group.comp's layout
layout(std430, binding = 4) readonly buffer Gamma { float gamma[]; };   // [tokens] (stride gamma_stride)
layout(std430, binding = 5) writeonly buffer Y { float y[]; };          // [tokens][y_stride]

layout(push_constant) uniform Push {
  uint n;
  uint k;
  uint tokens;
  uint n_expert;
  uint gamma_stride;
  uint y_stride;
} p;

void main() {
  const uint g = gl_GlobalInvocationID.x;
  if (g >= p.n * p.tokens) return;
  const uint t = g / p.n, i = g % p.n;
  const uint row_of = 2u * p.n_expert + p.tokens * p.k;
  float acc = 0.0;
  for (uint j = 0; j < p.k; ++j) acc += wts[t * p.k + j] * down[uint(grp[row_of + t * p.k + j]) * p.n + i];
  const float gm = 1.0 / (1.0 + exp(-gamma[t * p.gamma_stride]));
  y[t * p.y_stride + i] = acc + gm * sh[t * p.n + i];
}
