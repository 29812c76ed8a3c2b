#version 450
// The MoE layer's output, one invocation per value (moe_combine.glsl's arithmetic). Where a
// residual add and a norm follow, rms_norm.comp COMBINE does all three in one dispatch.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Down { float down[]; };     // [routed rows][n]
layout(std430, binding = 1) readonly buffer Shared { float sh[]; };     // [tokens][n]
layout(std430, binding = 2) readonly buffer Weights { float wts[]; };   // [tokens][k]
layout(std430, binding = 3) readonly buffer Groups { int grp[]; };      // moe_group.comp's layout
layout(std430, binding = 4) readonly buffer Gamma { float gamma[]; };   // [tokens] (stride gamma_stride)
layout(std430, binding = 5) writeonly buffer Y { float y[]; };          // [tokens][y_stride]

#include "moe_combine.glsl"

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
  y[t * p.y_stride + i] = combine_value(t, i, p.n, p.k, p.tokens, p.n_expert, p.gamma_stride);
}
