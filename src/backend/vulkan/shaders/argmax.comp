#version 450
// Index and value of the largest entry of each row, ties to the lowest index: the rule of the
// greedy sampler (sampling/sampler.h). Greedy decoding reads back these 8 bytes per row instead
// of a row of logits. One workgroup of 256 per row; each invocation scans every 256th entry, then
// a shared-memory tree keeps (larger value, or equal value with the lower index).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { uint best[]; };  // [row] {index, float bits}

layout(push_constant) uniform Push {
  uint n;
  uint stride;  // floats between rows
} p;

const uint WG = 256;
shared float sv[WG];
shared uint si[WG];

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint tid = gl_LocalInvocationID.x;
  float bv = -1.0 / 0.0;
  uint bi = 0xffffffffu;
  for (uint i = tid; i < p.n; i += WG) {
    const float v = x[row * p.stride + i];
    if (bi == 0xffffffffu || v > bv) {  // strictly greater: the first (lowest) index wins a tie
      bv = v;
      bi = i;
    }
  }
  sv[tid] = bv;
  si[tid] = bi;
  barrier();
  for (uint k = WG / 2u; k > 0u; k >>= 1) {
    if (tid < k) {
      const float ov = sv[tid + k];
      const uint oi = si[tid + k];
      if (oi != 0xffffffffu && (si[tid] == 0xffffffffu || ov > sv[tid] || (ov == sv[tid] && oi < si[tid]))) {
        sv[tid] = ov;
        si[tid] = oi;
      }
    }
    barrier();
  }
  if (tid == 0u) {
    best[2u * row] = si[0];
    best[2u * row + 1u] = floatBitsToUint(sv[0]);
  }
}
