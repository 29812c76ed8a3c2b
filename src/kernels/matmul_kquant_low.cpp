// Scalar twins of llama.cpp's x86 summation orders for Q2_K and Q3_K weights against Q8_K
// activations (matmul_kquant.cpp describes the K-quant orders in general). Integer sums inside a
// super-block are exact; the float steps are the order:
//
//  lanes (ggml_vec_dot_q2_K_q8_K / ggml_vec_dot_q3_K_q8_K, AVX2 code): 8 int32 lanes per
//    super-block, lane l holding sub-block scale x product for the values 32g + 4l .. 32g + 4l + 3
//    of every group g of 32 (so lanes 0..3 use the scale of sub-block 2g, lanes 4..7 of 2g + 1);
//    lane l's float accumulator += (d_a * d_w) x lane, super-block after super-block, then the
//    lanes added as hsum_float_8. Q2_K first adds its mins term into the same accumulators: lane
//    l += (-d_a * dmin_w) x (min_2l x bsum_2l + min_2l+1 x bsum_2l+1), fused, before the scale term.
//  blocks (Q2_K matrices with a multiple of 8 rows, which llama.cpp repacks into block_q2_Kx8):
//    per group of values the exact sums S (scale x product) and M (min x activation sum); acc +=
//    S * (d_w * d_a), accm += M * (dmin_w * d_a), both fused; result acc - accm. The group is the
//    super-block in ggml_gemv_q2_K_8x8_q8_K (single rows: decoding, MoE experts; SumOrder::VecDot
//    here) and 128 values in ggml_gemm_q2_K_8x8_q8_K (prompt batches of 4 rows; SumOrder::Gemm).
#include <cmath>

#include "kernels/convert.h"
#include "kernels/kquant.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels::detail {

float q2_k_dot_lanes8_ref(const BlockQ2_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const float d = a[b].d * fp16_to_fp32(w[b].d);
    const float dmin = -a[b].d * fp16_to_fp32(w[b].dmin);
    for (int l = 0; l < 8; ++l) {
      const int prod = (w[b].scales[2 * l] >> 4) * a[b].bsums[2 * l] + (w[b].scales[2 * l + 1] >> 4) * a[b].bsums[2 * l + 1];
      acc[l] = std::fma(dmin, static_cast<float>(prod), acc[l]);
    }
    for (int l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (int g = 0; g < 8; ++g) {
        int32_t s = 0;
        for (int k = 32 * g + 4 * l; k < 32 * g + 4 * l + 4; ++k) s += q2_k_value(w[b], k) * a[b].qs[k];
        lane += (w[b].scales[(32 * g + 4 * l) / 16] & 0x0f) * s;
      }
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  return hsum8_ref(acc);
}

float q2_k_dot_blocks_ref(const BlockQ2_K* w, const BlockQ8_K* a, int64_t nb, int group) {
  float acc = 0, accm = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const float ds = fp16_to_fp32(w[b].d) * a[b].d, dm = fp16_to_fp32(w[b].dmin) * a[b].d;
    for (int j0 = 0; j0 < 16; j0 += group / 16) {
      int32_t s = 0, m = 0;
      for (int j = j0; j < j0 + group / 16; ++j) {
        int32_t p = 0;
        for (int k = 16 * j; k < 16 * j + 16; ++k) p += q2_k_value(w[b], k) * a[b].qs[k];
        s += (w[b].scales[j] & 0x0f) * p;
        m += (w[b].scales[j] >> 4) * a[b].bsums[j];
      }
      acc = std::fma(static_cast<float>(s), ds, acc);
      accm = std::fma(static_cast<float>(m), dm, accm);
    }
  }
  return acc - accm;
}

float q3_k_dot_lanes8_ref(const BlockQ3_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const float d = a[b].d * fp16_to_fp32(w[b].d);
    for (int l = 0; l < 8; ++l) {
      int32_t lane = 0;
      for (int g = 0; g < 8; ++g) {
        int32_t s = 0;
        for (int k = 32 * g + 4 * l; k < 32 * g + 4 * l + 4; ++k) s += q3_k_value(w[b], k) * a[b].qs[k];
        lane += q3_k_scale(w[b], (32 * g + 4 * l) / 16) * s;
      }
      acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
    }
  }
  return hsum8_ref(acc);
}

}  // namespace clover::kernels::detail
