#version 450
// The causal depthwise conv of a GDN layer followed by silu, over a run of tokens, with the
// conv state update: the twin of kernels::conv_silu_ref (src/kernels/vecmath.h) as
// Forward::gdn_layer drives it (model/gdn.cpp).
//
//   y[t][c] = silu(sum_j tap_j(t)[c] * w[c * K + j])     tap_j(t) = input at time t - (K-1) + j,
//                                                         from the state before the run
//   state (the last K-1 inputs, oldest first, [K-1][C]) <- the last K-1 of (state ++ inputs)
//
// The sum is a chain of fused multiply-adds from 0 over j, as the CPU's. One invocation per
// channel walks the tokens in order; channels are independent, so the state is updated in place.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };      // [n_tokens][x_stride]
layout(std430, binding = 1) buffer State { float st[]; };          // [K-1][C]
layout(std430, binding = 2) readonly buffer W { float w[]; };      // [C][K]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };     // [n_tokens][y_stride]

layout(push_constant) uniform Push {
  uint channels;
  uint kernel;  // K <= 8
  uint n_tokens;
  uint x_stride, y_stride;
} p;

void main() {
  const uint c = gl_GlobalInvocationID.x;
  if (c >= p.channels) return;
  const uint K = p.kernel;
  float win[8];  // win[j]: the input K-1-j steps back before the current token, oldest first
  for (uint j = 0; j + 1u < K; ++j) win[j] = st[j * p.channels + c];
  for (uint t = 0; t < p.n_tokens; ++t) {
    win[K - 1u] = x[t * p.x_stride + c];
    precise float acc = 0.0;
    for (uint j = 0; j < K; ++j) acc = fma(win[j], w[c * K + j], acc);
    y[t * p.y_stride + c] = acc / (1.0 + exp(-acc));
    for (uint j = 0; j + 1u < K; ++j) win[j] = win[j + 1u];
  }
  for (uint j = 0; j + 1u < K; ++j) st[j * p.channels + c] = win[j];
}
