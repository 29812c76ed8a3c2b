#version 450
// g = silu(g) * u over rows: the twin of kernels::swiglu_span_ref (src/kernels/vecmath.h), in
// place on g. silu(x) = x / (1 + exp(-x)) with the device's exp (the CPU uses ggml's polynomial:
// a difference of an ulp or two).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };

layout(push_constant) uniform Push {
  uint n;
  uint rows;
  uint stride;  // floats between rows, both buffers
} p;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n * p.rows) return;
  const uint at = (i / p.n) * p.stride + i % p.n;
  const float x = g[at];
  g[at] = x / (1.0 + exp(-x)) * u[at];
}
