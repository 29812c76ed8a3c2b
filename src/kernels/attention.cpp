// Attention kernel: dispatch to the copy of the tiled kernel for the active instruction set, the
// scalar reference twin, and the helpers both share (kernels/attention.h).
#include "kernels/attention.h"

#include <cmath>
#include <vector>

#include "kernels/convert.h"
#include "kernels/matmul.h"

#define CLOVER_ATTN_ISA baseline
#include "kernels/attention_tiled.inc"
#undef CLOVER_ATTN_ISA

namespace clover::kernels {

namespace avx2 {
void attention_tiled(const AttentionRows&, int, float, const KvHeadRef&, const KvHeadRef&, AttentionScratch&);
}
namespace avx512 {
void attention_tiled(const AttentionRows&, int, float, const KvHeadRef&, const KvHeadRef&, AttentionScratch&);
}

void AttentionScratch::reserve(int hd) {
  if (head_dim == hd) return;
  head_dim = hd;
  const size_t hdp = (static_cast<size_t>(hd) + 15) / 16 * 16;
  q.assign(static_cast<size_t>(kAttnMaxRows) * hd, 0.0f);
  kt.assign(hdp * kAttnKeyTile, 0.0f);
  vt.assign(kAttnKeyTile * hdp, 0.0f);  // padding columns stay zero
  p.assign(static_cast<size_t>(kAttnMaxRows) * kAttnKeyTile, 0.0f);
  acc.assign(kAttnMaxRows * hdp, 0.0f);
  row.assign(16 * hdp, 0.0f);
  m.assign(kAttnMaxRows, 0.0f);
  l.assign(kAttnMaxRows, 0.0f);
}

bool kv_type_supported(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::Q8_0; }

bool kv_type_fits(DType t, int head_dim) { return kv_type_supported(t) && head_dim % dtype_block_size(t) == 0; }

void round_query(DType k_type, float* q, int hd) {
  if (k_type == DType::F16) {
    for (int d = 0; d < hd; ++d) q[d] = fp16_to_fp32(fp32_to_fp16(q[d]));
  } else if (k_type == DType::Q8_0) {
    for (int b = 0; b < hd / kQK; ++b) {  // one block at a time: nothing allocated per call
      BlockQ8_0 block;
      quantize_row_q8_0_activation(q + b * kQK, &block, kQK);
      dequantize_row(DType::Q8_0, &block, q + b * kQK, kQK);
    }
  }
}

void attention(const AttentionRows& rows, int hd, float scale, const KvHeadRef& k, const KvHeadRef& v,
               AttentionScratch& scratch) {
  if (attention_exact_fits(k, v, hd)) return attention_exact(rows, hd, scale, k, v, scratch);
  switch (isa_active()) {
    case Isa::Avx512:
      return avx512::attention_tiled(rows, hd, scale, k, v, scratch);
    case Isa::Avx2:
      return avx2::attention_tiled(rows, hd, scale, k, v, scratch);
    default:
      return baseline::attention_tiled(rows, hd, scale, k, v, scratch);
  }
}

void attention_ref(const AttentionRows& rows, int hd, float scale, const KvHeadRef& k, const KvHeadRef& v) {
  std::vector<float> q(hd), kr(hd), vr(hd);
  std::vector<double> o(hd);
  for (int r = 0; r < rows.n; ++r) {
    const int64_t n = rows.n_keys[r];
    std::copy(rows.q[r], rows.q[r] + hd, q.begin());
    round_query(k.type, q.data(), hd);
    std::vector<double> s(static_cast<size_t>(n));
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      dequantize_row(k.type, k.data + j * k.row_stride, kr.data(), hd);
      double dot = 0.0;
      for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * kr[d];
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0.0;
    std::fill(o.begin(), o.end(), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      const double p = std::exp(s[j] - mx);
      sum += p;
      dequantize_row(v.type, v.data + j * v.row_stride, vr.data(), hd);
      for (int d = 0; d < hd; ++d) o[d] += p * vr[d];
    }
    for (int d = 0; d < hd; ++d) rows.o[r][d] = n > 0 ? static_cast<float>(o[d] / sum) : 0.0f;
  }
}

}  // namespace clover::kernels
