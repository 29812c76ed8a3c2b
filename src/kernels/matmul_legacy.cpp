// Scalar twins of llama.cpp's x86 dot products for Q4_1, Q5_0 and Q5_1 weights
// (ggml_vec_dot_q4_1_q8_1, ggml_vec_dot_q5_0_q8_0, ggml_vec_dot_q5_1_q8_1; llama.cpp does not
// repack these types, so every product takes this one order). Per block of 32: 8 int32 lanes
// (lane l: the products of values 4l .. 4l + 3), each lane's float accumulator += (d_w * d_a) x
// lane, fused, block after block, then the lanes added as hsum_float_8. Q5_0 multiplies the
// signed values q - 16. Q4_1 / Q5_1 multiply the unsigned q and add their offsets apart: one
// float accumulator += m_w * s_a (fused, as GCC compiles ggml's `summs += m * s`), added after
// the lanes.
#include <cmath>

#include "kernels/convert.h"
#include "kernels/legacy_quant.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels::detail {

namespace {

template <class Block, int (*Value)(const Block&, int), int Offset, class Act>
float dot_lanes8(const Block* w, const Act* a, int64_t nb, float* summs) {
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d);
    for (int l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (int k = 4 * l; k < 4 * l + 4; ++k) lane += (Value(w[b], k) - Offset) * a[b].qs[k];
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
    if constexpr (requires { w[b].m; }) *summs = std::fma(fp16_to_fp32(w[b].m), fp16_to_fp32(a[b].s), *summs);
  }
  return hsum8_ref(acc);
}

}  // namespace

float q4_1_dot_ref(const BlockQ4_1* w, const BlockQ8_1* a, int64_t nb) {
  float summs = 0;
  const float lanes = dot_lanes8<BlockQ4_1, q4_1_value, 0>(w, a, nb, &summs);
  return lanes + summs;
}

float q5_0_dot_ref(const BlockQ5_0* w, const BlockQ8_0* a, int64_t nb) {
  float unused = 0;
  return dot_lanes8<BlockQ5_0, q5_0_value, 16>(w, a, nb, &unused);
}

float q5_1_dot_ref(const BlockQ5_1* w, const BlockQ8_1* a, int64_t nb) {
  float summs = 0;
  const float lanes = dot_lanes8<BlockQ5_1, q5_1_value, 0>(w, a, nb, &summs);
  return lanes + summs;
}

float legacy_dot_ref(DType t, const void* w, const void* a, int64_t cols) {
  const int64_t nb = cols / kQK;
  switch (t) {
    case DType::Q4_1: return q4_1_dot_ref(static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(a), nb);
    case DType::Q5_0: return q5_0_dot_ref(static_cast<const BlockQ5_0*>(w), static_cast<const BlockQ8_0*>(a), nb);
    case DType::Q5_1: return q5_1_dot_ref(static_cast<const BlockQ5_1*>(w), static_cast<const BlockQ8_1*>(a), nb);
    default: return 0.0f;
  }
}

void matmul_legacy_ref(const MatmulCall& c) {
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  for (int64_t i = 0; i < c.n; ++i) {
    const void* arow = c.acts->row(c.act_index(i));
    for (int64_t o = c.o_begin; o < c.o_end; ++o)
      c.y[i * c.ldy + o] = legacy_dot_ref(c.w->type, wbase + static_cast<size_t>(o) * c.w->row_stride, arow, c.w->cols);
  }
}

}  // namespace clover::kernels::detail
