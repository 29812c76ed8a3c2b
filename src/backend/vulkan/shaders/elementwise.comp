#version 450
// Row-wise elementwise ops of the forward pass, over `rows` rows of n values:
//   mode 0  y += x              the residual adds (twin: the loops x += y in the CPU executor)
//   mode 1  y *= sigmoid(x)     the attention output gate (twin: backend/cpu/attention.cpp)
//   mode 2  y  = x              copies (the embedded tokens into the residual stream)
// y (r, c) is at r * y_row + c; x (r, c) at r * x_row + (c / seg) * x_seg + x_off + c % seg, so x
// can be a strided view (the gate halves of the per-head [query | gate] rows: seg = head_dim,
// x_seg = 2 head_dim, x_off = head_dim).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint n, rows;
  uint y_row, x_row;
  uint seg, x_seg, x_off;
  uint mode;
} p;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n * p.rows) return;
  const uint r = i / p.n, c = i % p.n;
  const float v = x[r * p.x_row + (c / p.seg) * p.x_seg + p.x_off + c % p.seg];
  const uint yi = r * p.y_row + c;
  if (p.mode == 0u) y[yi] += v;
  else if (p.mode == 1u) y[yi] *= 1.0 / (1.0 + exp(-v));
  else y[yi] = v;
}
