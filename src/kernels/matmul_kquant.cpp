// Scalar twins of llama.cpp's x86 summation orders for K-quant weights against Q8_K activations
// (the AVX-512 and AVX2 paths give their bits). Integer sums inside a super-block are exact, so
// only the grouping of the float steps is the order:
//
//  lanes (ggml_vec_dot_qN_K_q8_K, the row dot product): per super-block, 8 int32 lanes, lane l
//    holding sub-block scale x product for the values 32g + 4l .. 32g + 4l + 3 of every group g of
//    32; each lane's float accumulator += (d_a * d_w) x lane, super-block after super-block; the 8
//    lanes added as hsum_float_8. Q4_K adds its mins term apart: 4 int32 lanes (lane i: mins of
//    sub-blocks 2i, 2i + 1 times the activation sums of their 32 values), each accumulated with
//    -(d_a * dmin_w), added (0 + 2) + (1 + 3) after the main sum. Q5_K sums the mins term in one
//    int32 per super-block, accumulated into a float with a fused multiply-add. Q6_K multiplies
//    the unsigned 6-bit values and removes the -32 offset per lane from the activation sums:
//    lane l subtracts 32 x (scale x sum) of the sub-blocks of 16 numbered 2l and 2l + 1.
//  blocks (Q4_K matrices with a multiple of 8 rows, which llama.cpp repacks): per group of values
//    the exact int32 sum S of scale x product and M of min x activation sum; acc += S * (d_w *
//    d_a), accm += M * (dmin_w * d_a), both fused; result acc - accm. The group is the whole
//    super-block in ggml_gemv_q4_K_8x8_q8_K (single rows: decoding, MoE experts; SumOrder::VecDot
//    here) and 64 values in ggml_gemm_q4_K_8x8_q8_K (prompt batches of 4 rows; SumOrder::Gemm).
//  blocks (IQ4_XS matrices with a multiple of 8 rows: llama.cpp's IQ panel gemm, ggml-cpu/iqp.cpp,
//    which takes dense products of 8 or more tokens and the experts with 8 or more tokens, in the
//    zen4 and every AVX2 build): per super-block the exact int32 sum S of sub-block scale x
//    product; acc += S * (d_w * d_a), fused. For fewer tokens llama.cpp takes vec_dot's lanes
//    order; the engine keeps the prompt order for every row count (batch invariance, as for the
//    dense float products: docs/oracle.md).
#include <cmath>

#include "kernels/convert.h"
#include "kernels/kquant.h"
#include "kernels/legacy_quant.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels::detail {

namespace {
// The activation sums of the 8 sub-blocks of 32 (the 16-value bsums in pairs).
inline int bsum32(const BlockQ8_K& a, int j) { return a.bsums[2 * j] + a.bsums[2 * j + 1]; }
}  // namespace

float q4_k_dot_lanes8_ref(const BlockQ4_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc[8] = {}, accm[4] = {};
  for (int64_t b = 0; b < nb; ++b) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) k4_scale_min(w[b].scales, j, &sc[j], &mn[j]);
    const float d = a[b].d * fp16_to_fp32(w[b].d);
    const float dmin = -a[b].d * fp16_to_fp32(w[b].dmin);
    for (int i = 0; i < 4; ++i) {
      const int prod = mn[2 * i] * bsum32(a[b], 2 * i) + mn[2 * i + 1] * bsum32(a[b], 2 * i + 1);
      accm[i] = std::fma(dmin, static_cast<float>(prod), accm[i]);
    }
    for (int l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (int g = 0; g < 8; ++g) {
        int32_t s = 0;
        for (int k = 32 * g + 4 * l; k < 32 * g + 4 * l + 4; ++k) s += q4_k_value(w[b], k) * a[b].qs[k];
        lane += sc[g] * s;
      }
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  return hsum8_ref(acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
}

float q4_k_dot_blocks_ref(const BlockQ4_K* w, const BlockQ8_K* a, int64_t nb, int group) {
  float acc = 0, accm = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const float ds = fp16_to_fp32(w[b].d) * a[b].d, dm = fp16_to_fp32(w[b].dmin) * a[b].d;
    for (int g0 = 0; g0 < 8; g0 += group / 32) {
      int32_t s = 0, m = 0;
      for (int j = g0; j < g0 + group / 32; ++j) {
        int sc, mn;
        k4_scale_min(w[b].scales, j, &sc, &mn);
        int32_t p = 0;
        for (int k = 32 * j; k < 32 * j + 32; ++k) p += q4_k_value(w[b], k) * a[b].qs[k];
        s += sc * p;
        m += mn * bsum32(a[b], j);
      }
      acc = std::fma(static_cast<float>(s), ds, acc);
      accm = std::fma(static_cast<float>(m), dm, accm);
    }
  }
  return acc - accm;
}

float q5_k_dot_lanes8_ref(const BlockQ5_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc[8] = {}, summs = 0;
  for (int64_t b = 0; b < nb; ++b) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) k4_scale_min(w[b].scales, j, &sc[j], &mn[j]);
    const float d = a[b].d * fp16_to_fp32(w[b].d);
    const float dmin = -a[b].d * fp16_to_fp32(w[b].dmin);
    int32_t mins = 0;
    for (int j = 0; j < 8; ++j) mins += mn[j] * bsum32(a[b], j);
    summs = std::fma(dmin, static_cast<float>(mins), summs);
    for (int l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (int g = 0; g < 8; ++g) {
        int32_t s = 0;
        for (int k = 32 * g + 4 * l; k < 32 * g + 4 * l + 4; ++k) s += q5_k_value(w[b], k) * a[b].qs[k];
        lane += sc[g] * s;
      }
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  return hsum8_ref(acc) + summs;
}

float q6_k_dot_lanes8_ref(const BlockQ6_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const float d = a[b].d * fp16_to_fp32(w[b].d);
    for (int l = 0; l < 8; ++l) {
      // The unsigned values (0..63) against the activations; 4 consecutive values lie in one
      // sub-block of 16.
      int32_t lane = 0;
      for (int g = 0; g < 8; ++g) {
        int32_t s = 0;
        for (int k = 32 * g + 4 * l; k < 32 * g + 4 * l + 4; ++k) s += q6_k_value(w[b], k) * a[b].qs[k];
        lane += w[b].scales[(32 * g + 4 * l) / 16] * s;
      }
      // The -32 offset from the activation sums: lane l takes sub-blocks 2l and 2l + 1.
      lane -= 32 * (w[b].scales[2 * l] * a[b].bsums[2 * l] + w[b].scales[2 * l + 1] * a[b].bsums[2 * l + 1]);
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  return hsum8_ref(acc);
}

// IQ4_XS (ggml_vec_dot_iq4_xs_q8_K): the lanes order with the table values and the signed
// sub-block scales; d = d_w * d_a.
float iq4_xs_dot_lanes8_ref(const BlockIQ4_XS* w, const BlockQ8_K* a, int64_t nb) {
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(w[b].d) * a[b].d;
    for (int l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (int g = 0; g < 8; ++g) {
        int32_t s = 0;
        for (int k = 32 * g + 4 * l; k < 32 * g + 4 * l + 4; ++k) s += iq4_xs_value(w[b], k) * a[b].qs[k];
        lane += iq4_xs_scale(w[b], g) * s;
      }
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  return hsum8_ref(acc);
}

float iq4_xs_dot_blocks_ref(const BlockIQ4_XS* w, const BlockQ8_K* a, int64_t nb) {
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (int g = 0; g < 8; ++g) {
      int32_t s = 0;
      for (int k = 32 * g; k < 32 * g + 32; ++k) s += iq4_xs_value(w[b], k) * a[b].qs[k];
      sum += iq4_xs_scale(w[b], g) * s;
    }
    acc = std::fma(static_cast<float>(sum), fp16_to_fp32(w[b].d) * a[b].d, acc);
  }
  return acc;
}

float kquant_dot_ref(DType t, const void* w, const void* a, int64_t cols, int64_t rows, SumOrder order) {
  const auto* act = static_cast<const BlockQ8_K*>(a);
  const int64_t nb = cols / kQK_K;
  switch (t) {
    case DType::Q4_K:
      if (!q4_k_blocks_order(rows)) return q4_k_dot_lanes8_ref(static_cast<const BlockQ4_K*>(w), act, nb);
      return q4_k_dot_blocks_ref(static_cast<const BlockQ4_K*>(w), act, nb, q4_k_group(order));
    case DType::Q2_K:
      if (!q2_k_blocks_order(rows)) return q2_k_dot_lanes8_ref(static_cast<const BlockQ2_K*>(w), act, nb);
      return q2_k_dot_blocks_ref(static_cast<const BlockQ2_K*>(w), act, nb, q2_k_group(order));
    case DType::Q3_K: return q3_k_dot_lanes8_ref(static_cast<const BlockQ3_K*>(w), act, nb);
    case DType::Q5_K: return q5_k_dot_lanes8_ref(static_cast<const BlockQ5_K*>(w), act, nb);
    case DType::Q6_K: return q6_k_dot_lanes8_ref(static_cast<const BlockQ6_K*>(w), act, nb);
    case DType::IQ4_XS:
      if (!iq4_xs_blocks_order(rows)) return iq4_xs_dot_lanes8_ref(static_cast<const BlockIQ4_XS*>(w), act, nb);
      return iq4_xs_dot_blocks_ref(static_cast<const BlockIQ4_XS*>(w), act, nb);
    default: return 0.0f;
  }
}

void matmul_kquant_ref(const MatmulCall& c) {
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  for (int64_t i = 0; i < c.n; ++i) {
    const void* arow = c.acts->row(c.act_index(i));
    for (int64_t o = c.o_begin; o < c.o_end; ++o)
      c.y[i * c.ldy + o] =
          kquant_dot_ref(c.w->type, wbase + static_cast<size_t>(o) * c.w->row_stride, arow, c.w->cols, c.w->rows, c.order);
  }
}

}  // namespace clover::kernels::detail
