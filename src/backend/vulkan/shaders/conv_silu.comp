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
//
// With L2 the GDN's L2 norm of the q and k heads follows in the same dispatch (bitwise
// rms_norm.comp mode 1 with eps / d and post 1 / sqrt(d) on the stored outputs: the same squares
// summed in the same order and tree): one workgroup per head of d channels, invocation i holding
// channels i, i + 64, ... of it; heads below norm_heads (the q and k heads) are normed token by
// token, the v heads after them only convolved.
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
#if defined(L2)
  uint d;           // channels per head, <= 4 * WG
  uint norm_heads;  // heads [0, norm_heads) are L2-normed
  float eps;        // rms_eps / d
  float post;       // 1 / sqrt(d)
#endif
} p;

#if defined(L2)
const uint WG = 64;
const uint PER = 4;  // channels of a head per invocation
shared float partial[WG];

void main() {
  const uint head = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint K = p.kernel, c0 = head * p.d;
  const bool norm = head < p.norm_heads;  // uniform in the workgroup
  float win[PER][8];
  for (uint m = 0; m < PER; ++m) {
    const uint i = tid + m * WG;
    if (i < p.d)
      for (uint j = 0; j + 1u < K; ++j) win[m][j] = st[j * p.channels + c0 + i];
  }
  for (uint t = 0; t < p.n_tokens; ++t) {
    float v[PER];
    float s = 0.0;
    for (uint m = 0; m < PER; ++m) {
      const uint i = tid + m * WG;
      if (i >= p.d) break;
      win[m][K - 1u] = x[t * p.x_stride + c0 + i];
      precise float acc = 0.0;
      for (uint j = 0; j < K; ++j) acc = fma(win[m][j], w[(c0 + i) * K + j], acc);
      v[m] = acc / (1.0 + exp(-acc));
      s += v[m] * v[m];
      for (uint j = 0; j + 1u < K; ++j) win[m][j] = win[m][j + 1u];
    }
    float scale = 1.0;
    if (norm) {
      partial[tid] = s;
      barrier();
      for (uint k = WG / 2u; k > 0u; k >>= 1) {
        if (tid < k) partial[tid] += partial[tid + k];
        barrier();
      }
      const float mean = partial[0] / float(p.d);
      scale = 1.0 / sqrt(mean + p.eps);
      barrier();  // every invocation has read the sum before the next token's tree
    }
    for (uint m = 0; m < PER; ++m) {
      const uint i = tid + m * WG;
      if (i >= p.d) break;
      y[t * p.y_stride + c0 + i] = norm ? v[m] * scale * p.post : v[m];
    }
  }
  for (uint m = 0; m < PER; ++m) {
    const uint i = tid + m * WG;
    if (i < p.d)
      for (uint j = 0; j + 1u < K; ++j) st[j * p.channels + c0 + i] = win[m][j];
  }
}
#else
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
#endif
