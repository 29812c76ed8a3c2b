// K-quant matmul with AVX-512 and GFNI for Q6_K and Q5_K, in vec_dot's 8-lane order (the
// twins' q6_k_dot_lanes8_ref / q5_k_dot_lanes8_ref, matmul_kquant.cpp); Q4_K and IQ4_XS are in
// matmul_kquant_avx512.cpp, the tiles both use in kquant_tiles_avx512.h.
//
// Q6_K and Q5_K (vec_dot's 8 lanes): one weight row at a time, 64 values per 512-bit step laid
// out as the activation's bytes (two groups of 32), so the int32 lanes of a step are the quads of
// two groups; the two 256-bit halves added are the 8 lanes of the AVX2 code. Scales are applied
// on the int16 pair sums with vpdpwssd. Several activation rows, and a repacked Q5_K matrix
// (Kx16) at any number of them, take 16-row tiles with lanes = rows in the same 8-lane order.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/convert.h"
#include "kernels/kquant.h"
#include "kernels/kquant_tiles_avx512.h"
#include "kernels/legacy_quant.h"
#include "kernels/matmul_internal.h"
#include "kernels/prefetch.h"

namespace clover::kernels::detail {
namespace {

// hsum_float_8: lanes l + 4, then (0 + 2) + (1 + 3).
CLOVER_INLINE float hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// The 8 int32 lanes of vec_dot's order from a 512-bit sum whose halves hold the quads of two groups.
CLOVER_INLINE __m256i fold_halves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// ---------------------------------------------------------------------------------------------
// Q6_K and Q5_K, vec_dot's lanes order: one weight row, each super-block unpacked once for up to
// kRowPanel activation rows (a GEMV of decoding: 1; more rows take the tiles below), their 8 float
// lanes kept in registers.

constexpr int kRowPanel = 3;

// vpermw indices: int16 lane p of step s takes element base(s) + p / 8 (a scale per 16 values).
constexpr std::array<int16_t, 32> scale_index(int first, int per) {
  std::array<int16_t, 32> idx{};
  for (int p = 0; p < 32; ++p) idx[p] = static_cast<int16_t>(first + p / per);
  return idx;
}
alignas(64) constexpr std::array<std::array<int16_t, 32>, 4> kQ6ScaleIdx = {
    scale_index(0, 8), scale_index(4, 8), scale_index(8, 8), scale_index(12, 8)};
alignas(64) constexpr std::array<std::array<int16_t, 32>, 4> kQ5ScaleIdx = {
    scale_index(0, 16), scale_index(2, 16), scale_index(4, 16), scale_index(6, 16)};

// GF2P8AFFINEQB byte maps (GFNI): result bit i of every byte is the parity of (matrix byte 7 - i
// AND the source byte), so a matrix whose byte 7 - i is 1 << j moves bit j to bit i and a zero
// byte clears bit i. The matrix is per qword, so the two 256-bit halves may differ.
constexpr uint64_t bit_to(int from, int to) { return uint64_t{1u << from} << (8 * (7 - to)); }
constexpr uint64_t kLowNibble = bit_to(0, 0) | bit_to(1, 1) | bit_to(2, 2) | bit_to(3, 3);
constexpr uint64_t kHighNibble = bit_to(4, 0) | bit_to(5, 1) | bit_to(6, 2) | bit_to(7, 3);
CLOVER_INLINE __m512i halves(uint64_t lo, uint64_t hi) {
  return _mm512_set_epi64(static_cast<int64_t>(hi), static_cast<int64_t>(hi), static_cast<int64_t>(hi), static_cast<int64_t>(hi),
                          static_cast<int64_t>(lo), static_cast<int64_t>(lo), static_cast<int64_t>(lo), static_cast<int64_t>(lo));
}
// Bits p, p + 1 of every byte to bits 4, 5: p = lo in the first 256-bit half, hi in the second.
CLOVER_INLINE __m512i bits_to_45(int lo, int hi) {
  return halves(bit_to(lo, 4) | bit_to(lo + 1, 5), bit_to(hi, 4) | bit_to(hi + 1, 5));
}

// Q6_K: out[r][o] = q6_k_dot_lanes8_ref(w, a[r], nb). Step s (0..3) holds values 64s .. 64s + 63:
// half h = s / 2, groups 4h + 2 (s % 2) and + 1: low (s even) or high nibbles of ql[64h .. 64h +
// 63], the high 2 bits from qh[32h .. 32h + 31] shifted by 0, 2 (s even) or 4, 6 per 256-bit half.
template <int NA>
void q6_k_rows(const BlockQ6_K* w, const BlockQ8_K* const* a, int64_t nb, float* const* out, int64_t o) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  // qh's 2-bit fields to bits 4-5 (the 256-bit halves take bits 0-1 / 2-3 for even steps, 4-5 /
  // 6-7 for odd ones), clean: one affine byte map each instead of shift, mask, shift.
  const __m512i hsel_even = bits_to_45(0, 2), hsel_odd = bits_to_45(4, 6);
  __m256 acc[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& x = w[b];
    __m512i q[4], sc[4];
    CLOVER_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(x.ql + 64 * h);
      const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh + 32 * h)));
      // (nibble & 0x0f) | high bits: vpternlogd 0xEC is (a & c) | b.
      q[2 * h] = _mm512_ternarylogic_epi32(l, _mm512_gf2p8affine_epi64_epi8(hb, hsel_even, 0), m4, 0xEC);
      q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), _mm512_gf2p8affine_epi64_epi8(hb, hsel_odd, 0),
                                               m4, 0xEC);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
    CLOVER_UNROLL
    for (int s = 0; s < 4; ++s)
      sc[s] = _mm512_permutexvar_epi16(_mm512_load_si512(kQ6ScaleIdx[s].data()), _mm512_castsi256_si512(sc16));
    const float dw = _cvtsh_ss(x.d);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const BlockQ8_K& y = a[r][b];
      __m512i sumi = _mm512_setzero_si512();
      CLOVER_UNROLL
      for (int s = 0; s < 4; ++s)
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[s], _mm512_loadu_si512(y.qs + 64 * s)), sc[s]);
      // Lane l of the -32 offset: scales 2l, 2l + 1 times the activation sums of their 16 values.
      const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), sc16);
      const __m256i lanes = _mm256_sub_epi32(fold_halves(sumi), _mm256_slli_epi32(off, 5));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y.d * dw), _mm256_cvtepi32_ps(lanes), acc[r]);
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) out[r][o] = hsum8(acc[r]);
}

// Q5_K: out[r][o] = q5_k_dot_lanes8_ref(w, a[r], nb). Step c (0..3) holds values 64c .. 64c + 63:
// the low (first half) and high (second half) nibbles of qs[32c .. 32c + 31], bit 4 from bits 2c
// and 2c + 1 of qh.
template <int NA>
void q5_k_rows(const BlockQ5_K* w, const BlockQ8_K* const* a, int64_t nb, float* const* out, int64_t o) {
  // One affine byte map each: the low nibble (first 256-bit half) or the high nibble (second) of
  // qs, and bit 2c (first half) or 2c + 1 (second) of qh moved to bit 4, both clean.
  const __m512i nib = halves(kLowNibble, kHighNibble);
  __m512i hsel[4];
  CLOVER_UNROLL
  for (int c = 0; c < 4; ++c) hsel[c] = halves(bit_to(2 * c, 4), bit_to(2 * c + 1, 4));
  __m256 acc[NA];
  float summs[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps(), summs[r] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ5_K& x = w[b];
    uint64_t sc, mn;  // byte j: sub-block j's scale, min
    k4_scales_mins(x.scales, &sc, &mn);
    const __m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc)));
    const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn)));
    const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh)));
    __m512i q[4], s16[4];
    CLOVER_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * c)));
      q[c] = _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(bits, nib, 0), _mm512_gf2p8affine_epi64_epi8(hb, hsel[c], 0));
      s16[c] = _mm512_permutexvar_epi16(_mm512_load_si512(kQ5ScaleIdx[c].data()), _mm512_castsi128_si512(sc16));
    }
    const float dw = _cvtsh_ss(x.d), dminw = _cvtsh_ss(x.dmin);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const BlockQ8_K& y = a[r][b];
      __m512i sumi = _mm512_setzero_si512();
      CLOVER_UNROLL
      for (int c = 0; c < 4; ++c)
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[c], _mm512_loadu_si512(y.qs + 64 * c)), s16[c]);
      // The mins: sum over sub-blocks of min x (activation sum of its 32 values), exact.
      const __m256i b32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)),
                                            _mm256_set1_epi16(1));
      const __m128i b16 = _mm_packs_epi32(_mm256_castsi256_si128(b32), _mm256_extracti128_si256(b32, 1));
      __m128i mv = _mm_madd_epi16(mn16, b16);
      mv = _mm_add_epi32(mv, _mm_unpackhi_epi64(mv, mv));
      mv = _mm_add_epi32(mv, _mm_shuffle_epi32(mv, 1));
      summs[r] = std::fma(-y.d * dminw, static_cast<float>(_mm_cvtsi128_si32(mv)), summs[r]);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y.d * dw), _mm256_cvtepi32_ps(fold_halves(sumi)), acc[r]);
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) out[r][o] = hsum8(acc[r]) + summs[r];
}

// ---------------------------------------------------------------------------------------------
// Q6_K and Q5_K for panels of several activation rows: 16-row tiles with lanes = rows, as for
// Q4_K, in vec_dot's 8-lane order. Per super-block, quad l of group g of every row is one vector
// (w[g][l]); vpmaddubsw against the activation's 4 bytes, broadcast, and vpdpwssd with the rows'
// scale of that quad as an int16 pair add scale x quad into lane l's int32 vector (lanes[l]: lane
// l of every row at once). The float steps are the twin's, 16 rows at a time, and hsum_float_8's
// tree is the same adds between the 8 lane vectors.

constexpr int kLanesTileMinRows = 4;  // activation rows from which a panel takes the tiles

struct LanesTileScales {
  __m512i sp[8][2];  // the scale of group g's quads l < 4 / l >= 4, as an int16 pair (sc, sc)
  __m512i op[8];     // Q6_K: the scales of sub-blocks 2l, 2l + 1 as an int16 pair (the -32 offset)
  __m512i mn[4];     // Q5_K: the mins of sub-blocks 2c, 2c + 1 as an int16 pair
  __m512 d, dmin;
};
struct LanesTileBlock : LanesTileScales {
  __m512i w[8][8];  // group g, quad l: the 4 unsigned values 32g + 4l .. +3 of every row
};

// pshufb indices: every dword's int16 pair takes bytes (i, j) of that dword in the high bytes (a
// vpsraw by 8 then sign-extends them), or in the low bytes (zero-extended) with `low`.
constexpr std::array<int8_t, 64> pair_bytes(int i, int j, bool low) {
  std::array<int8_t, 64> idx{};
  for (int k = 0; k < 64; k += 4) {
    const int base = k % 16;
    idx[k] = static_cast<int8_t>(low ? base + i : -1);
    idx[k + 1] = static_cast<int8_t>(low ? -1 : base + i);
    idx[k + 2] = static_cast<int8_t>(low ? base + j : -1);
    idx[k + 3] = static_cast<int8_t>(low ? -1 : base + j);
  }
  return idx;
}
constexpr std::array<std::array<int8_t, 64>, 4> pair_table(bool low, bool same) {
  return {pair_bytes(0, same ? 0 : 1, low), pair_bytes(1, same ? 1 : 2, low), pair_bytes(2, same ? 2 : 3, low),
          pair_bytes(3, same ? 3 : 0, low)};
}
alignas(64) constexpr auto kSameSigned = pair_table(false, true);  // (b, b), b = byte k of the dword, signed
alignas(64) constexpr auto kSameUnsigned = pair_table(true, true);
alignas(64) constexpr std::array<std::array<int8_t, 64>, 2> kPairSigned = {pair_bytes(0, 1, false),
                                                                             pair_bytes(2, 3, false)};

CLOVER_INLINE __m512i pair_signed(__m512i v, const std::array<int8_t, 64>& idx) {
  return _mm512_srai_epi16(_mm512_shuffle_epi8(v, _mm512_load_si512(idx.data())), 8);
}

void unpack_q6_k_tile(const uint8_t* const* rows, size_t off, LanesTileBlock& t) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3);
  __m512i ql[32], qh[16];
  transpose_rows(rows, off, ql);
  transpose_rows(rows, off + 64, ql + 16);
  transpose_rows(rows, off + 128, qh);
  // Group g = 4h + gg, quad l: low bits from ql dword 16h + 8 (gg & 1) + l (high nibbles for
  // gg >= 2), high bits 2gg, 2gg + 1 of qh dword 8h + l.
  CLOVER_UNROLL
  for (int g = 0; g < 8; ++g) {
    const int h = g / 4, gg = g % 4;
    CLOVER_UNROLL
    for (int l = 0; l < 8; ++l) {
      const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(ql[16 * h + 8 * (gg & 1) + l], 4 * (gg >> 1)), m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(qh[8 * h + l], 2 * gg), m3);
      t.w[g][l] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
    }
  }
  __m512i sc[4];  // the 16 signed scales: byte k of sc[j / 4] is scale 4 (j / 4) + k
  transpose_headers(rows, off + 192, sc);
  CLOVER_UNROLL
  for (int g = 0; g < 8; ++g)
    CLOVER_UNROLL
    for (int hl = 0; hl < 2; ++hl) {
      const int j = 2 * g + hl;  // sub-block of 16
      t.sp[g][hl] = pair_signed(sc[j / 4], kSameSigned[j % 4]);
    }
  CLOVER_UNROLL
  for (int l = 0; l < 8; ++l) t.op[l] = pair_signed(sc[l / 2], kPairSigned[l % 2]);
  alignas(32) uint16_t d16[16];
  for (int r = 0; r < 16; ++r) std::memcpy(&d16[r], rows[r] + off + offsetof(BlockQ6_K, d), 2);
  t.d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d16)));
}

// Q5_K's scales, mins, d and dmin of super-block b.
template <class Src>
CLOVER_INLINE void unpack_q5_k_scales(const Src& src, int64_t b, LanesTileScales& t) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512i h[4];
  src.header(b, h);
  t.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
  t.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
  const __m512i m6 = _mm512_set1_epi8(0x3f), m2 = _mm512_set1_epi8(0x03);
  const __m512i sc03 = _mm512_and_si512(h[1], m6), mn03 = _mm512_and_si512(h[2], m6);
  const __m512i sc47 = _mm512_or_si512(_mm512_and_si512(h[3], m4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[1], 6), m2), 4));
  const __m512i mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), m4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h[2], 6), m2), 4));
  CLOVER_UNROLL
  for (int g = 0; g < 8; ++g) {
    t.sp[g][0] = _mm512_shuffle_epi8(g < 4 ? sc03 : sc47, _mm512_load_si512(kSameUnsigned[g % 4].data()));
    t.sp[g][1] = t.sp[g][0];
  }
  const __m512i p0 = _mm512_load_si512(kPair0.data()), p1 = _mm512_load_si512(kPair1.data());
  t.mn[0] = _mm512_shuffle_epi8(mn03, p0);
  t.mn[1] = _mm512_shuffle_epi8(mn03, p1);
  t.mn[2] = _mm512_shuffle_epi8(mn47, p0);
  t.mn[3] = _mm512_shuffle_epi8(mn47, p1);
}

// Group g, quad l of a Q5_K super-block from its qs dword 8 (g / 2) + l (high nibbles for odd g)
// and bit g of its qh dword l: bit g moved to bit 4 alone by one affine byte map, then
// (nibble & 0x0f) | that bit in one vpternlogd (0xEC: (a & c) | b).
CLOVER_INLINE __m512i q5_k_quad(__m512i qs, __m512i qh, int g) {
  const __m512i lo = g % 2 ? _mm512_srli_epi16(qs, 4) : qs;
  const __m512i hi = _mm512_gf2p8affine_epi64_epi8(qh, _mm512_set1_epi64(static_cast<int64_t>(bit_to(g, 4))), 0);
  return _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi8(0x0f), 0xEC);
}

// Super-block b's qs (dwords 12 .. 43) and qh (dwords 4 .. 11) of every row.
template <class Src>
CLOVER_INLINE void q5_k_bits(const Src& src, int64_t b, __m512i qs[32], __m512i qh[16]) {
  src.dwords16(b, 12, qs);
  src.dwords16(b, 28, qs + 16);
  src.dwords8(b, 4, qh);
}

template <class Src>
CLOVER_INLINE void unpack_q5_k_tile(const Src& src, int64_t b, LanesTileBlock& t) {
  unpack_q5_k_scales(src, b, t);
  __m512i qs[32], qh[16];
  q5_k_bits(src, b, qs, qh);
  CLOVER_UNROLL
  for (int g = 0; g < 8; ++g)
    CLOVER_UNROLL
    for (int l = 0; l < 8; ++l) t.w[g][l] = q5_k_quad(qs[8 * (g / 2) + l], qh[l], g);
}

// One super-block of a tile against one activation super-block y, added into the lanes' float
// accumulators (and Q5_K's mins into summs): w(g, l) is quad l of group g of every row.
template <bool kQ6, class W>
CLOVER_INLINE void lanes_block(const W& w, const LanesTileScales& x, const BlockQ8_K& y, __m512 acc[8], __m512& summs) {
  const auto* aq = reinterpret_cast<const unaligned_i32*>(y.qs);
  __m512i lanes[8];
  CLOVER_UNROLL
  for (int l = 0; l < 8; ++l) lanes[l] = _mm512_setzero_si512();
  CLOVER_UNROLL
  for (int g = 0; g < 8; ++g)
    CLOVER_UNROLL
    for (int l = 0; l < 8; ++l)
      lanes[l] = _mm512_dpwssd_epi32(lanes[l], _mm512_maddubs_epi16(w(g, l), _mm512_set1_epi32(aq[8 * g + l])),
                                     x.sp[g][l / 4]);
  if constexpr (kQ6) {
    const auto* bs = reinterpret_cast<const unaligned_i32*>(y.bsums);
    CLOVER_UNROLL
    for (int l = 0; l < 8; ++l) {
      const __m512i off = _mm512_dpwssd_epi32(_mm512_setzero_si512(), x.op[l], _mm512_set1_epi32(bs[l]));
      lanes[l] = _mm512_sub_epi32(lanes[l], _mm512_slli_epi32(off, 5));
    }
  } else {
    const __m256i b32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)),
                                          _mm256_set1_epi16(1));
    alignas(32) int32_t bp[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bp), _mm256_packs_epi32(b32, b32));
    static constexpr int kBp[4] = {0, 1, 4, 5};
    __m512i m = _mm512_setzero_si512();
    CLOVER_UNROLL
    for (int c = 0; c < 4; ++c) m = _mm512_dpwssd_epi32(m, x.mn[c], _mm512_set1_epi32(bp[kBp[c]]));
    summs = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(-y.d), x.dmin), _mm512_cvtepi32_ps(m), summs);
  }
  const __m512 ds = _mm512_mul_ps(_mm512_set1_ps(y.d), x.d);
  CLOVER_UNROLL
  for (int l = 0; l < 8; ++l) acc[l] = _mm512_fmadd_ps(ds, _mm512_cvtepi32_ps(lanes[l]), acc[l]);
}

// The 16 rows' results from the lanes' accumulators: hsum_float_8 per row,
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then Q5_K's mins.
template <bool kQ6>
CLOVER_INLINE void lanes_store(const __m512 acc[8], __m512 summs, float* out) {
  const __m512 r0 = _mm512_add_ps(acc[4], acc[0]), r1 = _mm512_add_ps(acc[5], acc[1]);
  const __m512 r2 = _mm512_add_ps(acc[6], acc[2]), r3 = _mm512_add_ps(acc[7], acc[3]);
  __m512 v = _mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3));
  if constexpr (!kQ6) v = _mm512_add_ps(v, summs);
  _mm512_storeu_ps(out, v);
}

// One activation row against a tile's nb unpacked super-blocks; out: the 16 rows' results.
template <bool kQ6>
void lanes_tile_row(const LanesTileBlock* t, const BlockQ8_K* a, int64_t nb, float* out) {
  __m512 acc[8];
  __m512 summs = _mm512_setzero_ps();
  CLOVER_UNROLL
  for (int l = 0; l < 8; ++l) acc[l] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const LanesTileBlock& x = t[b];
    lanes_block<kQ6>([&](int g, int l) { return x.w[g][l]; }, x, a[b], acc, summs);
  }
  lanes_store<kQ6>(acc, summs, out);
}

// One activation row (a decoding GEMV) against a Q5_K tile read from src: each super-block's
// quads are built from its qs and qh as the products take them, with no unpacked tile written
// and read back. The integers and float steps are lanes_tile_row's.
template <class Src>
void q5_k_tile16_one(const Src& src, const BlockQ8_K* a, int64_t nb, float* out, const uint8_t* pf) {
  __m512 acc[8];
  __m512 summs = _mm512_setzero_ps();
  CLOVER_UNROLL
  for (int l = 0; l < 8; ++l) acc[l] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, pf += 16 * sizeof(BlockQ5_K)) {
    prefetch_span<16 * sizeof(BlockQ5_K), Hint::L2>(pf);
    LanesTileScales x;
    unpack_q5_k_scales(src, b, x);
    __m512i qs[32], qh[16];
    q5_k_bits(src, b, qs, qh);
    lanes_block<false>([&](int g, int l) { return q5_k_quad(qs[8 * (g / 2) + l], qh[l], g); }, x, a[b], acc, summs);
  }
  lanes_store<false>(acc, summs, out);
}

// A Q5_K matrix repacked (Kx16): whole tiles from o_begin / 16 (rows outside [o_begin, o_end)
// computed into scratch and dropped), read with plain loads; panels of kLanesTileMinRows or more
// activation rows unpack each tile once, fewer stream it per row.
void run_q5_k_packed(const MatmulCall& c) {
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK_K;
  const int64_t panel = panel_rows(static_cast<size_t>(nb) * sizeof(BlockQ8_K), 1);
  thread_local std::vector<LanesTileBlock> tiles;
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    const bool unpacked = p1 - p0 >= kLanesTileMinRows;
    for (int64_t o = c.o_begin / 16 * 16; o < c.o_end; o += 16) {
      const uint8_t* first = wbase + static_cast<size_t>(o) * c.w->row_stride;
      const PackedTile<sizeof(BlockQ5_K)> src{first};
      if (unpacked) {
        if (tiles.size() < static_cast<size_t>(nb)) tiles.resize(static_cast<size_t>(nb));
        for (int64_t b = 0; b < nb; ++b) unpack_q5_k_tile(src, b, tiles[b]);
      }
      const bool whole = o >= c.o_begin && o + 16 <= c.o_end;
      for (int64_t i = p0; i < p1; ++i) {
        const auto* a = static_cast<const BlockQ8_K*>(c.acts->row(c.act_index(i)));
        alignas(64) float tmp[16];
        float* y = whole ? c.y + i * c.ldy + o : tmp;
        if (unpacked) lanes_tile_row<false>(tiles.data(), a, nb, y);
        else q5_k_tile16_one(src, a, nb, y, c.tile_prefetch(o, 16, 0));
        if (!whole)
          for (int64_t r = std::max(o, c.o_begin); r < std::min(o + 16, c.o_end); ++r) c.y[i * c.ldy + r] = tmp[r - o];
      }
    }
  }
}

template <bool kQ6>
void run_lanes_tiles(const MatmulCall& c) {
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK_K;
  const size_t block = kQ6 ? sizeof(BlockQ6_K) : sizeof(BlockQ5_K);
  const int64_t panel = panel_rows(static_cast<size_t>(nb) * sizeof(BlockQ8_K), 1);
  thread_local std::vector<LanesTileBlock> tiles;
  if (tiles.size() < static_cast<size_t>(nb)) tiles.resize(static_cast<size_t>(nb));
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    for (int64_t o = c.o_begin; o < c.o_end; o += 16) {
      const int64_t nrows = std::min<int64_t>(16, c.o_end - o);
      const uint8_t* rows[16];
      for (int r = 0; r < 16; ++r) rows[r] = wbase + static_cast<size_t>(o + std::min<int64_t>(r, nrows - 1)) * c.w->row_stride;
      for (int64_t b = 0; b < nb; ++b) {
        if constexpr (kQ6) unpack_q6_k_tile(rows, static_cast<size_t>(b) * block, tiles[b]);
        else unpack_q5_k_tile(RowMajorTile<sizeof(BlockQ5_K)>{rows}, b, tiles[b]);
      }
      for (int64_t i = p0; i < p1; ++i) {
        const auto* a = static_cast<const BlockQ8_K*>(c.acts->row(c.act_index(i)));
        float* y = c.y + i * c.ldy + o;
        if (nrows == 16) {
          lanes_tile_row<kQ6>(tiles.data(), a, nb, y);
        } else {
          alignas(64) float tmp[16];
          lanes_tile_row<kQ6>(tiles.data(), a, nb, tmp);
          std::memcpy(y, tmp, sizeof(float) * static_cast<size_t>(nrows));
        }
      }
    }
  }
}

// Rows [o_begin, o_end) against panels of up to kRowPanel activation rows. K::rows<NA>(w, a, nb, out, o).
template <class K>
void run_rows(const MatmulCall& c) {
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK_K;
  for (int64_t p0 = 0; p0 < c.n; p0 += kRowPanel) {
    const int na = static_cast<int>(std::min<int64_t>(c.n, p0 + kRowPanel) - p0);
    const BlockQ8_K* a[kRowPanel];
    float* out[kRowPanel];
    for (int r = 0; r < na; ++r) {
      a[r] = static_cast<const BlockQ8_K*>(c.acts->row(c.act_index(p0 + r)));
      out[r] = c.y + (p0 + r) * c.ldy;
    }
    // A later row streams in while this one computes (decoding reads weights from DRAM): the one
    // at least K::kLeadBytes ahead (the next row when 0).
    const size_t stride = c.w->row_stride;
    const size_t ahead = std::max<size_t>(1, (K::kLeadBytes + stride - 1) / stride) * stride;
    for (int64_t o = c.o_begin; o < c.o_end; ++o) {
      const uint8_t* wrow = wbase + static_cast<size_t>(o) * stride;
      prefetch_bytes<K::kHint>(wrow + ahead, stride);
      const auto* w = reinterpret_cast<const typename K::Block*>(wrow);
      switch (na) {
        case 3: K::template rows<3>(w, a, nb, out, o); break;
        case 2: K::template rows<2>(w, a, nb, out, o); break;
        default: K::template rows<1>(w, a, nb, out, o); break;
      }
    }
  }
}
// The prefetch of each (kernels/prefetch.h): Q6_K's rows 12 KiB ahead into L2 (8 rows of a
// 2048-wide matrix: one thread from memory 0.77 -> 0.90-0.94 of a plain read on a Zen 4), Q5_K's
// the next row into L1 (its 8 rows ahead into L2 measured worse there).
struct Q6KRows {
  using Block = BlockQ6_K;
  static constexpr Hint kHint = Hint::L2;
  static constexpr size_t kLeadBytes = 12 << 10;
  template <int NA>
  static void rows(const Block* w, const BlockQ8_K* const* a, int64_t nb, float* const* out, int64_t o) {
    q6_k_rows<NA>(w, a, nb, out, o);
  }
};
struct Q5KRows {
  using Block = BlockQ5_K;
  static constexpr Hint kHint = Hint::L1;
  static constexpr size_t kLeadBytes = 0;
  template <int NA>
  static void rows(const Block* w, const BlockQ8_K* const* a, int64_t nb, float* const* out, int64_t o) {
    q5_k_rows<NA>(w, a, nb, out, o);
  }
};

}  // namespace

void matmul_kquant_lanes_avx512(const MatmulCall& c) {
  if (c.w->type == DType::Q6_K) return c.n >= kLanesTileMinRows ? run_lanes_tiles<true>(c) : run_rows<Q6KRows>(c);
  if (c.w->layout == Layout::Kx16) return run_q5_k_packed(c);
  return c.n >= kLanesTileMinRows ? run_lanes_tiles<false>(c) : run_rows<Q5KRows>(c);
}

}  // namespace clover::kernels::detail
