// Q2_K and Q3_K rows with AVX2 (the AVX-512 path runs them too), called by matmul_kquant_avx2.cpp
// for up to 4 activation rows per weight row. Each gives the bits of its scalar twin
// (matmul_kquant_low.cpp): the int32 lanes hold the same exact sums, the float steps are the same.
// Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include <cmath>

#include "kernels/convert.h"
#include "kernels/kquant.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels::detail {
namespace {

constexpr int kMaxNA = 4;

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// hsum_float_8: lanes l + 4, then (0 + 2) + (1 + 3).
inline float hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Per group g of 32 values, the two sub-block scales (16 values each) as 16 int16 lanes.
inline __m256i scale_pair(int lo, int hi) {
  return _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(lo)), _mm_set1_epi16(static_cast<short>(hi)));
}

}  // namespace

void q2_k_row_avx2(const BlockQ2_K* w, const BlockQ8_K* const* a, int na, int64_t nb, int group, float* const* out,
                   int64_t o) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0x0f);
  __m256 acc[kMaxNA];
  float accs[kMaxNA] = {}, accm[kMaxNA] = {};
  for (int r = 0; r < na; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ2_K& x = w[b];
    // Group g = 4h + s of 32 values: the 2-bit plane s of qs[32h .. 32h + 31].
    __m256i q[8], sc[8];
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = load256(x.qs + 32 * h);
      for (int s = 0; s < 4; ++s) q[4 * h + s] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
    }
    for (int g = 0; g < 8; ++g) sc[g] = scale_pair(x.scales[2 * g] & 0x0f, x.scales[2 * g + 1] & 0x0f);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    const float dw = fp16_to_fp32_f16c(x.d), dminw = fp16_to_fp32_f16c(x.dmin);
    for (int r = 0; r < na; ++r) {
      const BlockQ8_K& y = a[r][b];
      const __m256i mprod = _mm256_madd_epi16(mins, load256(y.bsums));  // lane l: sub-blocks 2l, 2l + 1
      if (group) {
        // Blocks order: exact sums per group of `group` values (lanes l of mprod cover its 32-value groups).
        alignas(32) int32_t mlane[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(mlane), mprod);
        const float ds = dw * y.d, dm = dminw * y.d;
        for (int g0 = 0; g0 < 8; g0 += group / 32) {
          __m256i s = _mm256_setzero_si256();
          int32_t m = 0;
          for (int g = g0; g < g0 + group / 32; ++g) {
            s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], load256(y.qs + 32 * g)), sc[g]));
            m += mlane[g];
          }
          accs[r] = std::fma(static_cast<float>(hsum_i32(s)), ds, accs[r]);
          accm[r] = std::fma(static_cast<float>(m), dm, accm[r]);
        }
      } else {
        __m256i sumi = _mm256_setzero_si256();
        for (int g = 0; g < 8; ++g)
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], load256(y.qs + 32 * g)), sc[g]));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(-y.d * dminw), _mm256_cvtepi32_ps(mprod), acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y.d * dw), _mm256_cvtepi32_ps(sumi), acc[r]);
      }
    }
  }
  for (int r = 0; r < na; ++r) out[r][o] = group ? accs[r] - accm[r] : hsum8(acc[r]);
}

void q3_k_row_avx2(const BlockQ3_K* w, const BlockQ8_K* const* a, int na, int64_t nb, float* const* out, int64_t o) {
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  __m256 acc[kMaxNA];
  for (int r = 0; r < na; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ3_K& x = w[b];
    // Group g = 4h + s: low 2 bits as Q2_K's; hi[g] is 4 where bit g of hmask is clear (the -4).
    const __m256i hbits = load256(x.hmask);
    __m256i lo[8], hi[8], sc[8];
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = load256(x.qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        const int g = 4 * h + s;
        lo[g] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        const __m256i clear = _mm256_andnot_si256(hbits, _mm256_slli_epi16(one, g));  // bit g where hmask's is 0
        hi[g] = _mm256_slli_epi16(_mm256_srli_epi16(clear, g), 2);
      }
    }
    for (int g = 0; g < 8; ++g) sc[g] = scale_pair(q3_k_scale(x, 2 * g), q3_k_scale(x, 2 * g + 1));
    const float dw = fp16_to_fp32_f16c(x.d);
    for (int r = 0; r < na; ++r) {
      const BlockQ8_K& y = a[r][b];
      __m256i sumi = _mm256_setzero_si256();
      for (int g = 0; g < 8; ++g) {
        const __m256i av = load256(y.qs + 32 * g);
        const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(lo[g], av), _mm256_maddubs_epi16(hi[g], av));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, sc[g]));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y.d * dw), _mm256_cvtepi32_ps(sumi), acc[r]);
    }
  }
  for (int r = 0; r < na; ++r) out[r][o] = hsum8(acc[r]);
}

}  // namespace clover::kernels::detail
