// Q4_1, Q5_0, Q5_1 and IQ4_NL matmul with AVX2 (also what the AVX-512 path runs: the bits are fixed by
// the order of matmul_legacy.cpp, not by the vector width). Compiled with -mavx2 -mfma -mf16c.
//
// Per block the 32 unsigned values are unpacked into the 32 bytes of a register in value order,
// so maddubs + madd with ones put the products of values 4l .. 4l + 3 into int32 lane l, the lane
// of the twin; Q5_0's -16 is taken off each lane as 16 x the sum of its 4 activation bytes (exact
// integers either way). One weight row is unpacked per block and used for up to kNA activation rows.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/convert.h"
#include "kernels/legacy_quant.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels::detail {
namespace {

constexpr int kNA = 4;  // activation rows per weight row pass

#define CLOVER_INLINE inline __attribute__((always_inline))

// hsum_float_8: lanes l + 4, then (0 + 2) + (1 + 3).
CLOVER_INLINE float hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// The 32 nibbles in value order: low nibbles (values 0..15) in the lower half, high in the upper.
CLOVER_INLINE __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0f));
}

// 16 in byte j where bit j of the little-endian uint32 qh is set, 0 elsewhere.
CLOVER_INLINE __m256i unpack_high_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)),
                                             _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                               0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

template <DType T>
void row(const uint8_t* wrow, const uint8_t* const* a, int na, int64_t nb, float* const* out, int64_t o) {
  using Block = std::conditional_t<T == DType::Q4_1, BlockQ4_1, std::conditional_t<T == DType::Q5_0, BlockQ5_0, BlockQ5_1>>;
  using Act = std::conditional_t<T == DType::Q5_0, BlockQ8_0, BlockQ8_1>;
  const auto* w = reinterpret_cast<const Block*>(wrow);
  const __m256i ones16 = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi8(16);
  __m256 acc[kNA];
  float summs[kNA] = {};
  for (int r = 0; r < na; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Block& x = w[b];
    __m256i q = unpack_nibbles(x.qs);
    if constexpr (T != DType::Q4_1) q = _mm256_or_si256(q, unpack_high_bits(x.qh));
    const float dw = fp16_to_fp32_f16c(x.d);
    for (int r = 0; r < na; ++r) {
      const Act& y = reinterpret_cast<const Act*>(a[r])[b];
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
      __m256i lane = _mm256_madd_epi16(_mm256_maddubs_epi16(q, av), ones16);
      if constexpr (T == DType::Q5_0) lane = _mm256_sub_epi32(lane, _mm256_madd_epi16(_mm256_maddubs_epi16(sixteen, av), ones16));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * fp16_to_fp32_f16c(y.d)), _mm256_cvtepi32_ps(lane), acc[r]);
      if constexpr (T != DType::Q5_0) summs[r] = std::fma(fp16_to_fp32_f16c(x.m), fp16_to_fp32_f16c(y.s), summs[r]);
    }
  }
  for (int r = 0; r < na; ++r) out[r][o] = hsum8(acc[r]) + summs[r];
}

CLOVER_INLINE int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// IQ4_NL: the nibbles looked up in the level table (signed bytes), multiplied with ggml's sign
// trick. blocks: llama.cpp's repacked order (8k rows); single: tinyBLAS's lanes order (one set of
// accumulators, dense products of other matrices); otherwise vec_dot's lanes order with even and
// odd blocks in separate accumulators and an odd last block as a scalar step.
void iq4_nl_row(const uint8_t* wrow, const uint8_t* const* a, int na, int64_t nb, bool blocks, bool single,
                float* const* out, int64_t o) {
  const auto* w = reinterpret_cast<const BlockIQ4_NL*>(wrow);
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256 acc[2][kNA];
  float accs[kNA] = {};
  for (int r = 0; r < na; ++r) acc[0][r] = acc[1][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i q = _mm256_shuffle_epi8(lut, unpack_nibbles(w[b].qs));
    const __m256i qa = _mm256_sign_epi8(q, q);
    const float dw = fp16_to_fp32_f16c(w[b].d);
    const bool scalar_step = blocks || (!single && b % 2 == 0 && b + 1 == nb);
    const int set = single ? 0 : static_cast<int>(b % 2);
    for (int r = 0; r < na; ++r) {
      const BlockQ8_0& y = reinterpret_cast<const BlockQ8_0*>(a[r])[b];
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
      const __m256i lane = _mm256_madd_epi16(_mm256_maddubs_epi16(qa, _mm256_sign_epi8(av, q)), ones16);
      if (blocks) {
        accs[r] = std::fma(static_cast<float>(hsum_i32(lane)), dw * fp16_to_fp32_f16c(y.d), accs[r]);
      } else if (!scalar_step) {
        acc[set][r] = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32_f16c(y.d) * dw), _mm256_cvtepi32_ps(lane), acc[set][r]);
      } else {
        // After the pairs: hsum first, then the leftover block (it is the last one).
        const float s = hsum8(_mm256_add_ps(acc[0][r], acc[1][r]));
        accs[r] = std::fma(fp16_to_fp32_f16c(y.d) * dw, static_cast<float>(hsum_i32(lane)), s);
      }
    }
  }
  const bool leftover = !blocks && !single && nb % 2 == 1;
  for (int r = 0; r < na; ++r)
    out[r][o] = blocks || leftover ? accs[r] : single ? hsum8(acc[0][r]) : hsum8(_mm256_add_ps(acc[0][r], acc[1][r]));
}

}  // namespace

void matmul_legacy_avx2(const MatmulCall& c) {
  const DType t = c.w->type;
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK;
  const bool iq4_blocks = iq4_nl_blocks_order(c.w->rows);
  // Weight rows outer; a long batch in panels of activation rows that stay in L2.
  const int64_t panel = panel_rows(dtype_row_bytes(c.acts->type(), c.w->cols), kNA);
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    for (int64_t o = c.o_begin; o < c.o_end; ++o) {
      const uint8_t* wrow = wbase + static_cast<size_t>(o) * c.w->row_stride;
      for (int64_t i0 = p0; i0 < p1; i0 += kNA) {
        const int na = static_cast<int>(std::min<int64_t>(kNA, p1 - i0));
        const uint8_t* a[kNA];
        float* out[kNA];
        for (int r = 0; r < na; ++r) {
          a[r] = static_cast<const uint8_t*>(c.acts->row(c.act_index(i0 + r)));
          out[r] = c.y + (i0 + r) * c.ldy;
        }
        if (t == DType::IQ4_NL) iq4_nl_row(wrow, a, na, nb, iq4_blocks, c.order == SumOrder::Gemm, out, o);
        else if (t == DType::Q4_1) row<DType::Q4_1>(wrow, a, na, nb, out, o);
        else if (t == DType::Q5_0) row<DType::Q5_0>(wrow, a, na, nb, out, o);
        else row<DType::Q5_1>(wrow, a, na, nb, out, o);
      }
    }
  }
}

}  // namespace clover::kernels::detail
