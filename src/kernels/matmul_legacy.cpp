// Scalar twins of llama.cpp's x86 dot products for Q4_1, Q5_0 and Q5_1 weights
// (ggml_vec_dot_q4_1_q8_1, ggml_vec_dot_q5_0_q8_0, ggml_vec_dot_q5_1_q8_1; llama.cpp does not
// repack these types, so every product takes this one order). Per block of 32: 8 int32 lanes
// (lane l: the products of values 4l .. 4l + 3), each lane's float accumulator += (d_w * d_a) x
// lane, fused, block after block, then the lanes added as hsum_float_8. Q5_0 multiplies the
// signed values q - 16. Q4_1 / Q5_1 multiply the unsigned q and add their offsets apart: one
// float accumulator += m_w * s_a (fused, as GCC compiles ggml's `summs += m * s`), added after
// the lanes.
//
// IQ4_NL (against Q8_0) has three orders. Matrices of 8k rows are repacked by llama.cpp
// (block_iq4_nlx8, ggml_gemv / ggml_gemm_iq4_nl_8x8_q8_0): per block the exact int32 sum of its 32
// products, one float accumulator += sum * (d_w * d_a), fused, block after block. Other matrices
// are not repacked; their dense products of 2 or more tokens go to tinyBLAS_Q0_AVX (llamafile
// sgemm, which takes any shape): the lanes order of Q5_0 with the table values, one set of 8
// accumulators (SumOrder::Gemm); expert products (MUL_MAT_ID) and single tokens take
// ggml_vec_dot_iq4_nl_q8_0's: the same lanes, even blocks in one accumulator set and odd blocks
// in another, the two added lane by lane before hsum_float_8, an odd last block added as one
// fused scalar step (SumOrder::VecDot).
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

float iq4_nl_dot_lanes8_ref(const BlockIQ4_NL* w, const BlockQ8_0* a, int64_t nb) {
  float acc[2][8] = {};
  auto lanes = [&](int64_t b, float* out) {
    const float d = fp16_to_fp32(a[b].d) * fp16_to_fp32(w[b].d);
    for (int l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (int k = 4 * l; k < 4 * l + 4; ++k) lane += iq4_nl_value(w[b], k) * a[b].qs[k];
      out[l] = std::fma(d, static_cast<float>(lane), out[l]);
    }
  };
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) lanes(b, acc[0]), lanes(b + 1, acc[1]);
  float sum[8];
  for (int l = 0; l < 8; ++l) sum[l] = acc[0][l] + acc[1][l];
  float s = hsum8_ref(sum);
  if (b < nb) {  // the odd block left over: one scalar step
    int32_t sumi = 0;
    for (int k = 0; k < kQK; ++k) sumi += iq4_nl_value(w[b], k) * a[b].qs[k];
    s = std::fma(fp16_to_fp32(a[b].d) * fp16_to_fp32(w[b].d), static_cast<float>(sumi), s);
  }
  return s;
}

float iq4_nl_dot_gemm_ref(const BlockIQ4_NL* w, const BlockQ8_0* a, int64_t nb) {
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d);
    for (int l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (int k = 4 * l; k < 4 * l + 4; ++k) lane += iq4_nl_value(w[b], k) * a[b].qs[k];
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  return hsum8_ref(acc);
}

float iq4_nl_dot_blocks_ref(const BlockIQ4_NL* w, const BlockQ8_0* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (int k = 0; k < kQK; ++k) sum += iq4_nl_value(w[b], k) * a[b].qs[k];
    acc = std::fma(static_cast<float>(sum), fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d), acc);
  }
  return acc;
}

float legacy_dot_ref(DType t, const void* w, const void* a, int64_t cols, int64_t rows, SumOrder order) {
  const int64_t nb = cols / kQK;
  switch (t) {
    case DType::IQ4_NL: {
      const auto* wb = static_cast<const BlockIQ4_NL*>(w);
      const auto* ab = static_cast<const BlockQ8_0*>(a);
      if (iq4_nl_blocks_order(rows)) return iq4_nl_dot_blocks_ref(wb, ab, nb);
      return order == SumOrder::Gemm ? iq4_nl_dot_gemm_ref(wb, ab, nb) : iq4_nl_dot_lanes8_ref(wb, ab, nb);
    }
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
      c.y[i * c.ldy + o] = legacy_dot_ref(c.w->type, wbase + static_cast<size_t>(o) * c.w->row_stride, arow, c.w->cols, c.w->rows,
                                   c.order);
  }
}

}  // namespace clover::kernels::detail
