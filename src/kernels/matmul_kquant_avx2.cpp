// K-quant matmul with AVX2 (also what the AVX-512 path runs: the instructions are the same and
// the bits are fixed by the order, not by the vector width). Compiled with -mavx2 -mfma.
//
// Q6_K and Q5_K (lanes order), IQ4_XS (lanes or blocks order), Q4_K matrices of 8k rows (the
// repacked orders), and Q2_K / Q3_K (matmul_kquant_low_avx2.cpp) are vectorised; Q4_K matrices of
// other row counts run their scalar twin (small or rare in the files this engine loads). Integer
// sums within a super-block are exact, so the vector code only has to put the same values into
// each int32 lane as the order does (matmul_kquant.cpp); the float steps are the twins' steps. One
// weight row is unpacked per super-block and used for up to kNA activation rows.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/convert.h"
#include "kernels/kquant.h"
#include "kernels/legacy_quant.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels::detail {
namespace {

constexpr int kNA = 4;  // activation rows per weight row pass

#define CLOVER_INLINE inline __attribute__((always_inline))
#define CLOVER_UNROLL _Pragma("GCC unroll 16")

CLOVER_INLINE int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// hsum_float_8: lanes l + 4, then (0 + 2) + (1 + 3).
CLOVER_INLINE float hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// Byte shuffles that broadcast int16 word 2g of a 128-bit half to the low half and word 2g + 1 to
// the high half (q6_k_rows' scales).
constexpr std::array<uint8_t, 32> q6_scale_words(int g) {
  std::array<uint8_t, 32> idx{};
  for (int i = 0; i < 16; ++i) {
    idx[i] = static_cast<uint8_t>(4 * g + i % 2);
    idx[16 + i] = static_cast<uint8_t>(4 * g + 2 + i % 2);
  }
  return idx;
}
alignas(32) constexpr std::array<std::array<uint8_t, 32>, 4> kQ6ScaleWords = {q6_scale_words(0), q6_scale_words(1),
                                                                              q6_scale_words(2), q6_scale_words(3)};

// Q6_K against NA activation rows: out[r] = q6_k_dot_lanes8_ref(w, a[r], nb).
template <int NA>
void q6_k_rows(const BlockQ6_K* w, const BlockQ8_K* const* a, int64_t nb, float* const* out, int64_t o) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  __m256 acc[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& x = w[b];
    // The 8 groups of 32 unsigned 6-bit values, and per group the two scales (16 values each)
    // widened to 16 int16 lanes.
    __m256i q[8], sc[8];
    CLOVER_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.ql + 64 * h));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.ql + 64 * h + 32));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh + 32 * h));
      // High bits 2k, 2k + 1 of each qh byte moved to bits 4, 5 by one shift and one mask (16-bit
      // shifts: what crosses a byte boundary lands outside the mask).
      q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
      q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
      q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
      q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                     _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
    }
    // Lane l of the offset term: scales 2l, 2l + 1 times the activation sums of their 16 values.
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
    // sc[g]: scale 2g in the low 8 lanes, 2g + 1 in the high 8, by one byte shuffle of scales
    // 0..7 (g < 4) or 8..15 in both halves (a set1 per half costs ~5 operations).
    const __m256i sc_lo = _mm256_permute2x128_si256(sc16, sc16, 0x00), sc_hi = _mm256_permute2x128_si256(sc16, sc16, 0x11);
    CLOVER_UNROLL
    for (int g = 0; g < 8; ++g)
      sc[g] = _mm256_shuffle_epi8(g < 4 ? sc_lo : sc_hi,
                                  _mm256_load_si256(reinterpret_cast<const __m256i*>(kQ6ScaleWords[g % 4].data())));
    const float dw = fp16_to_fp32_f16c(x.d);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const BlockQ8_K& y = a[r][b];
      __m256i sumi = _mm256_setzero_si256();
      CLOVER_UNROLL
      for (int g = 0; g < 8; ++g) {
        const __m256i p16 = _mm256_maddubs_epi16(q[g], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 32 * g)));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, sc[g]));
      }
      const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), sc16);
      sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(off, 5));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y.d * dw), _mm256_cvtepi32_ps(sumi), acc[r]);
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) out[r][o] = hsum8(acc[r]);
}

// Q5_K against NA activation rows: out[r] = q5_k_dot_lanes8_ref(w, a[r], nb).
template <int NA>
void q5_k_rows(const BlockQ5_K* w, const BlockQ8_K* const* a, int64_t nb, float* const* out, int64_t o) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), m1 = _mm256_set1_epi8(1);
  __m256 acc[NA];
  float summs[NA] = {};
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ5_K& x = w[b];
    int sc[8], mn[8];
    CLOVER_UNROLL
    for (int j = 0; j < 8; ++j) k4_scale_min(x.scales, j, &sc[j], &mn[j]);
    // Group g of 32 values: nibbles of chunk g / 2 (low for even g), bit 4 from bit g of qh.
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh));
    __m256i q[8], s16[8];
    CLOVER_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * c));
      q[2 * c] = _mm256_and_si256(bits, m4);
      q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
    }
    CLOVER_UNROLL
    for (int g = 0; g < 8; ++g) {
      const __m256i h = _mm256_and_si256(_mm256_srli_epi16(hb, g), m1);  // bit g of every byte
      q[g] = _mm256_or_si256(q[g], _mm256_slli_epi16(h, 4));
      s16[g] = _mm256_set1_epi16(static_cast<short>(sc[g]));
    }
    const float dw = fp16_to_fp32_f16c(x.d), dminw = fp16_to_fp32_f16c(x.dmin);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const BlockQ8_K& y = a[r][b];
      __m256i sumi = _mm256_setzero_si256();
      CLOVER_UNROLL
      for (int g = 0; g < 8; ++g) {
        const __m256i p16 = _mm256_maddubs_epi16(q[g], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 32 * g)));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, s16[g]));
      }
      int32_t mins = 0;
      CLOVER_UNROLL
      for (int j = 0; j < 8; ++j) mins += mn[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
      summs[r] = std::fma(-y.d * dminw, static_cast<float>(mins), summs[r]);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y.d * dw), _mm256_cvtepi32_ps(sumi), acc[r]);
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) out[r][o] = hsum8(acc[r]) + summs[r];
}

// IQ4_XS against NA activation rows: out[r] = iq4_xs_dot_lanes8_ref(w, a[r], nb), or with
// `blocks` iq4_xs_dot_blocks_ref (the 8 lanes' exact sum, one fused step per super-block). The
// nibbles looked up in the table (signed bytes), multiplied with ggml's sign trick, then the
// signed sub-block scales on the int16 pairs.
template <int NA>
void iq4_xs_rows(const BlockIQ4_XS* w, const BlockQ8_K* const* a, int64_t nb, bool blocks, float* const* out,
                 int64_t o) {
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  __m256 acc[NA];
  float acc_blocks[NA] = {};
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XS& x = w[b];
    __m256i q[8], s16[8];
    CLOVER_UNROLL
    for (int g = 0; g < 8; ++g) {
      const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs + 16 * g)));
      q[g] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), m4));
      s16[g] = _mm256_set1_epi16(static_cast<short>(iq4_xs_scale(x, g)));
    }
    const float dw = fp16_to_fp32_f16c(x.d);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const BlockQ8_K& y = a[r][b];
      __m256i sumi = _mm256_setzero_si256();
      CLOVER_UNROLL
      for (int g = 0; g < 8; ++g) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 32 * g));
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q[g], q[g]), _mm256_sign_epi8(av, q[g]));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, s16[g]));
      }
      if (blocks)
        acc_blocks[r] = std::fma(static_cast<float>(hsum_i32(sumi)), dw * y.d, acc_blocks[r]);
      else
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y.d), _mm256_cvtepi32_ps(sumi), acc[r]);
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) out[r][o] = blocks ? acc_blocks[r] : hsum8(acc[r]);
}

// Q4_K, repacked orders: per group of `group` values (64: one 64-value chunk, or 256: the whole
// super-block) the exact sums S (scale x product) and M (min x activation sum), then acc += S * ds,
// accm += M * dm (fused, in group order), result acc - accm. The four chunk sums of a super-block
// come out of one horizontal-add tree and the four M of one vpmaddwd of the mins against the
// activation's pair sums, all exact integers, so the float steps see the twin's values.
template <int NA>
void q4_k_blocks_rows(const BlockQ4_K* w, const BlockQ8_K* const* a, int64_t nb, int group, float* const* out,
                      int64_t o) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  float acc[NA] = {}, accm[NA] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_K& x = w[b];
    uint64_t sc, mn;  // byte j: sub-block j's scale, min
    k4_scales_mins(x.scales, &sc, &mn);
    const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn)));
    __m256i lo[4], hi[4], slo[4], shi[4];
    CLOVER_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * c));
      lo[c] = _mm256_and_si256(bits, m4);
      hi[c] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
      slo[c] = _mm256_set1_epi16(static_cast<short>((sc >> (16 * c)) & 0xff));
      shi[c] = _mm256_set1_epi16(static_cast<short>((sc >> (16 * c + 8)) & 0xff));
    }
    const float d = fp16_to_fp32_f16c(x.d), dmin = fp16_to_fp32_f16c(x.dmin);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const BlockQ8_K& y = a[r][b];
      const float ds = d * y.d, dm = dmin * y.d;
      __m256i s[4];
      CLOVER_UNROLL
      for (int c = 0; c < 4; ++c) {
        const __m256i alo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 64 * c));
        const __m256i ahi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 64 * c + 32));
        s[c] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], alo), slo[c]),
                                _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], ahi), shi[c]));
      }
      // M_c = mn[2c] (bsums 4c + 4c+1) + mn[2c+1] (bsums 4c+2 + 4c+3): the pair sums as int16, then
      // one vpmaddwd with the mins.
      const __m256i b32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), ones);
      const __m128i m = _mm_madd_epi16(mn16, _mm_packs_epi32(_mm256_castsi256_si128(b32), _mm256_extracti128_si256(b32, 1)));
      if (group == 64) {
        // S_c: lanes 0-3 of each 128-bit half after the hadd tree, then the halves added.
        const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        alignas(16) int32_t sv[4], mv[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(sv),
                        _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1)));
        _mm_store_si128(reinterpret_cast<__m128i*>(mv), m);
        CLOVER_UNROLL
        for (int c = 0; c < 4; ++c) {
          acc[r] = std::fma(static_cast<float>(sv[c]), ds, acc[r]);
          accm[r] = std::fma(static_cast<float>(mv[c]), dm, accm[r]);
        }
      } else {
        const __m256i st = _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]));
        __m128i mt = _mm_add_epi32(m, _mm_unpackhi_epi64(m, m));
        mt = _mm_add_epi32(mt, _mm_shuffle_epi32(mt, 1));
        acc[r] = std::fma(static_cast<float>(hsum_i32(st)), ds, acc[r]);
        accm[r] = std::fma(static_cast<float>(_mm_cvtsi128_si32(mt)), dm, accm[r]);
      }
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) out[r][o] = acc[r] - accm[r];
}

// One weight row of a type with a per-row-count kernel against NA activation rows (registers hold
// the accumulators only when NA is a compile-time count).
template <int NA>
void rows(DType t, const uint8_t* wrow, const BlockQ8_K* const* a, int64_t nb, int group, bool iq4_blocks,
          float* const* out, int64_t o) {
  if (t == DType::Q6_K) q6_k_rows<NA>(reinterpret_cast<const BlockQ6_K*>(wrow), a, nb, out, o);
  else if (t == DType::Q5_K) q5_k_rows<NA>(reinterpret_cast<const BlockQ5_K*>(wrow), a, nb, out, o);
  else if (t == DType::IQ4_XS) iq4_xs_rows<NA>(reinterpret_cast<const BlockIQ4_XS*>(wrow), a, nb, iq4_blocks, out, o);
  else q4_k_blocks_rows<NA>(reinterpret_cast<const BlockQ4_K*>(wrow), a, nb, group, out, o);
}

}  // namespace

void matmul_kquant_avx2(const MatmulCall& c) {
  const DType t = c.w->type;
  const bool q4_blocks = t == DType::Q4_K && q4_k_blocks_order(c.w->rows);
  if (t == DType::Q4_K && !q4_blocks) return matmul_kquant_ref(c);
  const int q2_group = t == DType::Q2_K && q2_k_blocks_order(c.w->rows) ? q2_k_group(c.order) : 0;
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK_K;
  const int group = q4_k_group(c.order);
  const bool iq4_blocks = iq4_xs_blocks_order(c.w->rows);
  // Weight rows outer: each row's blocks are read once per group of kNA activation rows, and a
  // long batch is cut into panels of activation rows that stay in L2.
  const int64_t panel = panel_rows(dtype_row_bytes(DType::Q8_K, c.w->cols), kNA);
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    for (int64_t o = c.o_begin; o < c.o_end; ++o) {
      const uint8_t* wrow = wbase + static_cast<size_t>(o) * c.w->row_stride;
      for (int64_t i0 = p0; i0 < p1; i0 += kNA) {
        const int na = static_cast<int>(std::min<int64_t>(kNA, p1 - i0));
        const BlockQ8_K* a[kNA];
        float* out[kNA];
        for (int r = 0; r < na; ++r) {
          a[r] = static_cast<const BlockQ8_K*>(c.acts->row(c.act_index(i0 + r)));
          out[r] = c.y + (i0 + r) * c.ldy;
        }
        if (t == DType::Q2_K) q2_k_row_avx2(reinterpret_cast<const BlockQ2_K*>(wrow), a, na, nb, q2_group, out, o);
        else if (t == DType::Q3_K) q3_k_row_avx2(reinterpret_cast<const BlockQ3_K*>(wrow), a, na, nb, out, o);
        else
          switch (na) {
            case 4: rows<4>(t, wrow, a, nb, group, iq4_blocks, out, o); break;
            case 3: rows<3>(t, wrow, a, nb, group, iq4_blocks, out, o); break;
            case 2: rows<2>(t, wrow, a, nb, group, iq4_blocks, out, o); break;
            default: rows<1>(t, wrow, a, nb, group, iq4_blocks, out, o); break;
          }
      }
    }
  }
}

}  // namespace clover::kernels::detail
