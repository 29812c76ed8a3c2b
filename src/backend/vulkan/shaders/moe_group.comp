#version 450
// Groups each token's chosen experts by expert, on the device (so a pass needs no host round
// trip between routing and the expert products): moe_group.glsl, as a dispatch of its own (the
// passes route and group in one dispatch: moe_router.comp GROUP).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;  // moe_group.glsl's GROUP_WG
layout(std430, binding = 0) readonly buffer Ids { int ids[]; };  // [tokens][k]
layout(std430, binding = 1) writeonly buffer Groups { int grp[]; };

layout(push_constant) uniform Push {
  uint n_expert;  // <= 512
  uint k;
  uint tokens;
} p;

#include "moe_group.glsl"

void main() { group_rows(gl_LocalInvocationID.x, p.n_expert, p.k, p.tokens); }
