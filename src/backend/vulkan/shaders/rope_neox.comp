#version 450
// NEOX rotary embedding of the first n_rot dims of every head, in place: the twin of
// model::ops::rope_neox (src/model/ops.h). Pair i of a head is (i, i + n_rot / 2). qwen35moe's
// IMROPE sections give every rotary pair the text position when all position components are
// equal, which is the case for text (the loader checks the sections: model/hparams.cpp), so this
// is the rotation the CPU computes.
//
// cos and sin come from a table the host fills per pass ([n_tokens][n_rot / 2][2], the angles
// accumulated by repeated float products as ggml's rope cache does: vulkan/rope_table.h), because
// a GPU's sin and cos are not accurate enough at the angles of long contexts (~1e5 radians).
// One invocation per (token, head, pair).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Table { vec2 cs[]; };

layout(push_constant) uniform Push {
  uint n_tokens;
  uint heads;
  uint n_rot;
  uint row_stride;   // floats between tokens
  uint head_stride;  // floats between heads
} p;

void main() {
  const uint half_rot = p.n_rot / 2u;
  const uint g = gl_GlobalInvocationID.x;
  if (g >= p.n_tokens * p.heads * half_rot) return;
  const uint i = g % half_rot;
  const uint h = (g / half_rot) % p.heads;
  const uint t = g / (half_rot * p.heads);
  const uint base = t * p.row_stride + h * p.head_stride;
  const vec2 c = cs[t * half_rot + i];
  const float x0 = x[base + i], x1 = x[base + i + half_rot];
  precise float a = fma(x0, c.x, -(x1 * c.y));  // the CPU fuses one product of each output
  precise float b = fma(x0, c.y, x1 * c.x);
  x[base + i] = a;
  x[base + i + half_rot] = b;
}
