// K-quant matmul with AVX-512 (F + BW + VL + VNNI + VBMI) and GFNI, for the types of the files people
// download most: Q4_K and IQ4_XS here (repacked / panel orders, matrices of 8k rows), Q6_K and
// Q5_K (lanes order) in matmul_kquant_lanes_avx512.cpp. Every other K-quant (and Q4_K / IQ4_XS
// matrices whose row count is not a multiple of 8) runs matmul_kquant_avx2. The orders are the
// twins' (matmul_kquant.cpp): integer sums inside a super-block are exact in any grouping, so the
// vector code only has to put the same integers into each float step the twin takes.
//
// Q4_K, rows % 8 == 0 (llama.cpp's repacked gemv / gemm orders): a tile of 16 weight rows has its
// lanes = rows. Per super-block the rows' 16-byte headers (d, dmin, 12 scale bytes) are transposed
// into 4 dword vectors and their 6-bit scales and mins unpacked lane-wise; the 128 qs bytes of the
// 16 rows are transposed (two 16 x 16 dword transposes) so that vector m holds qs dword m of every
// row, and split into nibbles. vpdpbusd against the activation's 4 bytes, broadcast, gives every
// row's sub-block product sum P_j at once; S = sum of P_j x scale_j (vpmulld) and M = sum of
// min_j x activation sums (vpdpwssd on the pairs of sub-blocks) are the exact integers of the
// twin's group; acc += S x (d_w d_a) and accm += M x (dmin_w d_a) are 16 fused steps at once. No
// horizontal sum anywhere, and the weight rows are unpacked once for up to kNA activation rows.
// Weights repacked at load (Kx16, repack.h) hold those transposed vectors already: the tile
// reads them with plain loads (PackedTile), the same integers and float steps.
// The activations' Q8_K conversion (convert_q8_k_avx512) is here too.
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

// ---------------------------------------------------------------------------------------------
// Q4_K, repacked orders, 16 rows per tile.

constexpr int kNA = 4;  // activation rows per pass over a tile's unpacked super-block

// A super-block's headers for a 16-row tile: lanes = rows.
struct Q4KTileHeader {
  __m512i sc[8];  // sub-block scales (int32)
  __m512i mn[4];  // the mins of sub-blocks 2c, 2c + 1 as an int16 pair
  __m512 d, dmin;
};
// One super-block of a 16-row tile, unpacked: lanes = rows.
struct Q4KTileBlock : Q4KTileHeader {
  __m512i lo[4][8], hi[4][8];  // chunk c, qs dword k: values 64c + 4k .. +3 (lo), 64c + 32 + 4k .. +3 (hi)
};

// Super-block b of the tile's rows.
template <class Src>
CLOVER_INLINE void unpack_q4_k_header(const Src& src, int64_t b, Q4KTileHeader& t) {
  // Headers (d, dmin, 12 scale bytes): h[k] = dword k of every row.
  __m512i hd[4];
  src.header(b, hd);
  const __m512i h0 = hd[0], h1 = hd[1], h2 = hd[2], h3 = hd[3];
  t.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h0));
  t.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h0, 16)));
  // k4_scale_min, byte-wise in every lane: scale bytes 0..3 in h1, 4..7 in h2, 8..11 in h3.
  const __m512i m6 = _mm512_set1_epi8(0x3f), m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03);
  const __m512i sc03 = _mm512_and_si512(h1, m6), mn03 = _mm512_and_si512(h2, m6);
  const __m512i sc47 = _mm512_or_si512(_mm512_and_si512(h3, m4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h1, 6), m2), 4));
  const __m512i mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h3, 4), m4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h2, 6), m2), 4));
  const __m512i ff = _mm512_set1_epi32(0xff);
  CLOVER_UNROLL
  for (int j = 0; j < 4; ++j) {
    t.sc[j] = _mm512_and_si512(_mm512_srli_epi32(sc03, 8 * j), ff);
    t.sc[4 + j] = _mm512_and_si512(_mm512_srli_epi32(sc47, 8 * j), ff);
  }
  const __m512i p0 = _mm512_load_si512(kPair0.data()), p1 = _mm512_load_si512(kPair1.data());
  t.mn[0] = _mm512_shuffle_epi8(mn03, p0);
  t.mn[1] = _mm512_shuffle_epi8(mn03, p1);
  t.mn[2] = _mm512_shuffle_epi8(mn47, p0);
  t.mn[3] = _mm512_shuffle_epi8(mn47, p1);
}

// The 16 transposed qs dwords of half h (bytes 64h .. 64h + 63) against one activation row: qs
// dword m = 16h + i is chunk m / 8, quad m % 8; its low nibbles go to p[2c], high to p[2c + 1].
CLOVER_INLINE void q4_k_half_products(const __m512i v[16], int h, const unaligned_i32* aq, __m512i p[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  CLOVER_UNROLL
  for (int i = 0; i < 16; ++i) {
    const int m = 16 * h + i, c = m / 8, k = m % 8;
    p[2 * c] = _mm512_dpbusd_epi32(p[2 * c], _mm512_and_si512(v[i], m4), _mm512_set1_epi32(aq[16 * c + k]));
    p[2 * c + 1] = _mm512_dpbusd_epi32(p[2 * c + 1], _mm512_and_si512(_mm512_srli_epi16(v[i], 4), m4),
                                       _mm512_set1_epi32(aq[16 * c + 8 + k]));
  }
}

template <class Src>
CLOVER_INLINE void unpack_q4_k_tile(const Src& src, int64_t b, Q4KTileBlock& t) {
  unpack_q4_k_header(src, b, t);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  // qs: two 16 x 16 dword transposes (bytes 0..63 and 64..127).
  CLOVER_UNROLL
  for (int h = 0; h < 2; ++h) {
    __m512i v[16];
    src.dwords16(b, 4 + 16 * h, v);  // the qs follow the 16-byte header
    CLOVER_UNROLL
    for (int i = 0; i < 16; ++i) {
      const int m = 16 * h + i;  // qs dword m: chunk m / 8, quad m % 8
      t.lo[m / 8][m % 8] = _mm512_and_si512(v[i], m4);
      t.hi[m / 8][m % 8] = _mm512_and_si512(_mm512_srli_epi16(v[i], 4), m4);
    }
  }
}

// The rows' sub-block products p[j] with one activation super-block y, scaled and added into acc
// / accm in the twin's order.
CLOVER_INLINE void q4_k_tile_sums(const Q4KTileHeader& t, const __m512i p[8], const BlockQ8_K& y, int group, __m512& acc,
                                  __m512& accm) {
  // The activation sums of the 8 sub-blocks of 32, as int16 pairs (sub-blocks 2c, 2c + 1).
  const __m256i b32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)),
                                        _mm256_set1_epi16(1));
  alignas(32) int32_t bp[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(bp), _mm256_packs_epi32(b32, b32));  // pairs 0, 1 | 2, 3
  const __m512 da = _mm512_set1_ps(y.d);
  const __m512 ds = _mm512_mul_ps(t.d, da), dm = _mm512_mul_ps(t.dmin, da);
  static constexpr int kBp[4] = {0, 1, 4, 5};  // where the packs put pair c
  if (group == 64) {
    CLOVER_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m512i s = _mm512_add_epi32(_mm512_mullo_epi32(p[2 * c], t.sc[2 * c]),
                                         _mm512_mullo_epi32(p[2 * c + 1], t.sc[2 * c + 1]));
      const __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), t.mn[c], _mm512_set1_epi32(bp[kBp[c]]));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), ds, acc);
      accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), dm, accm);
    }
  } else {
    __m512i s = _mm512_mullo_epi32(p[0], t.sc[0]), m = _mm512_setzero_si512();
    CLOVER_UNROLL
    for (int j = 1; j < 8; ++j) s = _mm512_add_epi32(s, _mm512_mullo_epi32(p[j], t.sc[j]));
    CLOVER_UNROLL
    for (int c = 0; c < 4; ++c) m = _mm512_dpwssd_epi32(m, t.mn[c], _mm512_set1_epi32(bp[kBp[c]]));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), ds, acc);
    accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), dm, accm);
  }
}

// The rows' products with NA activation super-blocks, added into acc / accm in the twin's order.
template <int NA>
CLOVER_INLINE void q4_k_tile_block(const Q4KTileBlock& t, const BlockQ8_K* const* a, int64_t b, int group,
                                   __m512* acc, __m512* accm) {
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) {
    const BlockQ8_K& y = a[r][b];
    const auto* aq = reinterpret_cast<const unaligned_i32*>(y.qs);
    __m512i p[8];
    CLOVER_UNROLL
    for (int j = 0; j < 8; ++j) p[j] = _mm512_setzero_si512();
    CLOVER_UNROLL
    for (int k = 0; k < 8; ++k)
      CLOVER_UNROLL
      for (int c = 0; c < 4; ++c) {
        p[2 * c] = _mm512_dpbusd_epi32(p[2 * c], t.lo[c][k], _mm512_set1_epi32(aq[16 * c + k]));
        p[2 * c + 1] = _mm512_dpbusd_epi32(p[2 * c + 1], t.hi[c][k], _mm512_set1_epi32(aq[16 * c + 8 + k]));
      }
    q4_k_tile_sums(t, p, y, group, acc[r], accm[r]);
  }
}

// One activation row (a decoding GEMV): the qs bytes go from the transpose straight into the
// products, so no unpacked tile (78 vectors) is written to the stack and read back per super-block.
// The integers and float steps are q4_k_tile_block<1>'s.
template <class Src>
void q4_k_tile16_one(const Src& src, const BlockQ8_K* a, int64_t nb, int group, float* out, const uint8_t* pf) {
  __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, pf += 16 * sizeof(BlockQ4_K)) {
    prefetch_span<16 * sizeof(BlockQ4_K), Hint::L2>(pf);
    Q4KTileHeader t;
    unpack_q4_k_header(src, b, t);
    const auto* aq = reinterpret_cast<const unaligned_i32*>(a[b].qs);
    __m512i p[8];
    CLOVER_UNROLL
    for (int j = 0; j < 8; ++j) p[j] = _mm512_setzero_si512();
    CLOVER_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m512i v[16];
      src.dwords16(b, 4 + 16 * h, v);
      q4_k_half_products(v, h, aq, p);
    }
    q4_k_tile_sums(t, p, a[b], group, acc, accm);
  }
  _mm512_storeu_ps(out, _mm512_sub_ps(acc, accm));
}

// IQ4_XS, rows % 8 == 0 (the order of llama.cpp's IQ panel gemm): per super-block the exact
// S = sum over sub-blocks of (ls - 32) x product, acc += S x (d_w d_a). The same tiles as Q4_K:
// the table values + 128 as unsigned bytes (pshufb), vpdpbusd, and 128 x the activation sums of
// the sub-block taken off again.
struct IQ4XSTileBlock {
  __m512i w[8][8];  // sub-block j, quad k: values 32j + 4k .. +3 (k < 4: low nibbles of qs dword 4j + k)
  __m512i sc[8];    // ls - 32 (int32)
  __m512 d;
};

template <class Src>
CLOVER_INLINE void unpack_iq4_xs_tile(const Src& src, int64_t b, IQ4XSTileBlock& t) {
  // Headers: 16 bytes from each block start (d, scales_h, scales_l, and 8 qs bytes not used here).
  __m512i hd[4];
  src.header(b, hd);
  const __m512i h0 = hd[0], h1 = hd[1];
  t.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h0));
  const __m512i m4 = _mm512_set1_epi32(0x0f), m2 = _mm512_set1_epi32(3), bias = _mm512_set1_epi32(32);
  CLOVER_UNROLL
  for (int j = 0; j < 8; ++j) {
    const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(h1, 8 * (j / 2) + 4 * (j % 2)), m4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(h0, 16 + 2 * j), m2);
    t.sc[j] = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), bias);
  }
  const __m512i lut = _mm512_broadcast_i32x4(
      _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)), _mm_set1_epi8(-128)));
  const __m512i n4 = _mm512_set1_epi8(0x0f);
  CLOVER_UNROLL
  for (int h = 0; h < 2; ++h) {
    __m512i v[16];
    src.dwords16(b, 2 + 16 * h, v);  // the qs follow the 8-byte header
    CLOVER_UNROLL
    for (int i = 0; i < 16; ++i) {
      const int m = 16 * h + i;  // qs dword m: sub-block m / 4, quads m % 4 (low) and m % 4 + 4 (high)
      t.w[m / 4][m % 4] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v[i], n4));
      t.w[m / 4][m % 4 + 4] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v[i], 4), n4));
    }
  }
}

template <int NA>
CLOVER_INLINE void iq4_xs_tile_block(const IQ4XSTileBlock& t, const BlockQ8_K* const* a, int64_t b, int /*group*/,
                                     __m512* acc, __m512* /*accm*/) {
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) {
    const BlockQ8_K& y = a[r][b];
    const auto* aq = reinterpret_cast<const unaligned_i32*>(y.qs);
    const __m256i b32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)),
                                          _mm256_set1_epi16(1));
    alignas(32) int32_t bs[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bs), _mm256_slli_epi32(b32, 7));  // 128 x sub-block sums
    __m512i p[8];
    CLOVER_UNROLL
    for (int j = 0; j < 8; ++j) p[j] = _mm512_set1_epi32(-bs[j]);
    CLOVER_UNROLL
    for (int k = 0; k < 8; ++k)
      CLOVER_UNROLL
      for (int j = 0; j < 8; ++j) p[j] = _mm512_dpbusd_epi32(p[j], t.w[j][k], _mm512_set1_epi32(aq[8 * j + k]));
    __m512i s = _mm512_mullo_epi32(p[0], t.sc[0]);
    CLOVER_UNROLL
    for (int j = 1; j < 8; ++j) s = _mm512_add_epi32(s, _mm512_mullo_epi32(p[j], t.sc[j]));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(t.d, _mm512_set1_ps(y.d)), acc[r]);
  }
}

// What the 16-row tile loop needs of a type.
struct Q4KTiles {
  using Tile = Q4KTileBlock;
  static constexpr size_t kBlock = sizeof(BlockQ4_K);
  static constexpr bool kStreamsOne = true;  // one(): one activation row without an unpacked tile
  template <class Src>
  static void one(const Src& src, const BlockQ8_K* a, int64_t nb, int group, float* out, const uint8_t* pf) {
    q4_k_tile16_one(src, a, nb, group, out, pf);
  }
  template <class Src>
  static void unpack(const Src& src, int64_t b, Tile& t) { unpack_q4_k_tile(src, b, t); }
  template <int NA>
  static void block(const Tile& t, const BlockQ8_K* const* a, int64_t b, int group, __m512* acc, __m512* accm) {
    q4_k_tile_block<NA>(t, a, b, group, acc, accm);
  }
};
struct IQ4XSTiles {
  using Tile = IQ4XSTileBlock;
  static constexpr size_t kBlock = sizeof(BlockIQ4_XS);
  static constexpr bool kStreamsOne = false;
  template <class Src>
  static void unpack(const Src& src, int64_t b, Tile& t) { unpack_iq4_xs_tile(src, b, t); }
  template <int NA>
  static void block(const Tile& t, const BlockQ8_K* const* a, int64_t b, int group, __m512* acc, __m512* accm) {
    iq4_xs_tile_block<NA>(t, a, b, group, acc, accm);
  }
};

// Out[r]: acc - accm (accm stays zero for IQ4_XS: x - 0 is x).
template <class K, int NA, class Src>
void tile16(const Src& src, const BlockQ8_K* const* a, int64_t nb, int group, float* const* out, const uint8_t* pf) {
  alignas(64) typename K::Tile t;
  __m512 acc[NA], accm[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = accm[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, pf += 16 * K::kBlock) {
    prefetch_span<16 * K::kBlock, Hint::L2>(pf);
    K::unpack(src, b, t);
    K::template block<NA>(t, a, b, group, acc, accm);
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) _mm512_storeu_ps(out[r], _mm512_sub_ps(acc[r], accm[r]));
}

// A tile's super-blocks unpacked once, for a panel of more activation rows than one pass takes.
template <class K, int NA>
void tile16_unpacked(const typename K::Tile* t, const BlockQ8_K* const* a, int64_t nb, int group, float* const* out) {
  __m512 acc[NA], accm[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = accm[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) K::template block<NA>(t[b], a, b, group, acc, accm);
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) _mm512_storeu_ps(out[r], _mm512_sub_ps(acc[r], accm[r]));
}

// Activation rows [p0, p1) against the 16-row tile at output row o (nrows of them real: 8 or 16),
// read from src; pf: where to prefetch, a tile ahead.
template <class K, class Src>
void tile_pass(const MatmulCall& c, const Src& src, int64_t p0, int64_t p1, int64_t o, int64_t nrows, int group,
               const uint8_t* pf) {
  const int64_t nb = c.w->cols / kQK_K;
  const bool whole = nrows == 16 && o >= c.o_begin && o + 16 <= c.o_end;
  // More activation rows than one pass: unpack the tile once (L2-resident) for all of them.
  thread_local std::vector<typename K::Tile> tiles;
  const bool unpacked = p1 - p0 > kNA;
  if (unpacked) {
    if (tiles.size() < static_cast<size_t>(nb)) tiles.resize(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) K::unpack(src, b, tiles[b]);
  }
  for (int64_t i0 = p0; i0 < p1; i0 += kNA) {
    const int na = static_cast<int>(std::min<int64_t>(kNA, p1 - i0));
    const BlockQ8_K* a[kNA];
    float* out[kNA];
    alignas(64) float tmp[kNA][16];
    for (int r = 0; r < na; ++r) {
      a[r] = static_cast<const BlockQ8_K*>(c.acts->row(c.act_index(i0 + r)));
      out[r] = whole ? c.y + (i0 + r) * c.ldy + o : tmp[r];
    }
    if (unpacked) {
      switch (na) {
        case 4: tile16_unpacked<K, 4>(tiles.data(), a, nb, group, out); break;
        case 3: tile16_unpacked<K, 3>(tiles.data(), a, nb, group, out); break;
        case 2: tile16_unpacked<K, 2>(tiles.data(), a, nb, group, out); break;
        default: tile16_unpacked<K, 1>(tiles.data(), a, nb, group, out); break;
      }
    } else {
      switch (na) {
        case 4: tile16<K, 4>(src, a, nb, group, out, pf); break;
        case 3: tile16<K, 3>(src, a, nb, group, out, pf); break;
        case 2: tile16<K, 2>(src, a, nb, group, out, pf); break;
        default:
          if constexpr (K::kStreamsOne)
            K::one(src, a[0], nb, group, out[0], pf);
          else
            tile16<K, 1>(src, a, nb, group, out, pf);
          break;
      }
    }
    if (!whole)
      for (int r = 0; r < na; ++r)
        for (int64_t i = std::max(o, c.o_begin); i < std::min({o + 16, o + nrows, c.o_end}); ++i)
          c.y[(i0 + r) * c.ldy + i] = tmp[r][i - o];
  }
}

template <class K>
void run_tiles16(const MatmulCall& c, int group) {
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK_K;
  const int64_t panel = panel_rows(static_cast<size_t>(nb) * sizeof(BlockQ8_K), kNA);
  // Tiles of 16 rows from a multiple of 8 (of 16 when repacked: whole tiles only); rows outside
  // [o_begin, o_end) or past the matrix are computed into scratch (a last 8-row tile repeats its
  // rows) and dropped.
  const bool packed = c.w->layout == Layout::Kx16;
  const int64_t t_begin = packed ? c.o_begin / 16 * 16 : c.o_begin / 8 * 8;
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    for (int64_t o = t_begin; o < c.o_end; o += 16) {
      const int64_t nrows = std::min<int64_t>(16, c.w->rows - o);  // 8 or 16
      const uint8_t* first = wbase + static_cast<size_t>(o) * c.w->row_stride;
      const uint8_t* pf = c.tile_prefetch(o, 16, 0);
      if (packed) {
        tile_pass<K>(c, PackedTile<K::kBlock>{first}, p0, p1, o, nrows, group, pf);
        continue;
      }
      const uint8_t* rows[16];
      for (int r = 0; r < 16; ++r)
        rows[r] = wbase + static_cast<size_t>(o + (r < nrows ? r : r - 8)) * c.w->row_stride;
      tile_pass<K>(c, RowMajorTile<K::kBlock>{rows}, p0, p1, o, nrows, group, pf);
    }
  }
}

}  // namespace

void convert_q8_k_avx512(const float* x, int64_t cols, BlockQ8_K* row) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQK_K; ++b, x += kQK_K) {
    BlockQ8_K& y = row[b];
    // The largest magnitude (a NaN is skipped: vmaxps returns its second operand), then the first
    // value that has it, as the scalar loop's strict comparison picks it.
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < kQK_K; j += 16) m = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), m);
    const float amax = _mm512_reduce_max_ps(m);
    if (!(amax > 0.0f)) {
      std::memset(&y, 0, sizeof(BlockQ8_K));
      continue;
    }
    float vmax = 0;
    const __m512 am = _mm512_set1_ps(amax);
    for (int j = 0; j < kQK_K; j += 16) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), am, _CMP_EQ_OQ);
      if (hit) {
        vmax = x[j + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / vmax;
    const __m512 is = _mm512_set1_ps(iscale);
    const __m512i top = _mm512_set1_epi32(127);
    for (int j = 0; j < kQK_K; j += 64) {
      // cvtps2dq rounds half to even (MXCSR default), as nearbyint does; out-of-range values (a NaN
      // or an infinite scale) become INT_MIN there as in the scalar cast, and vpmovdb truncates to
      // int8 as the scalar cast does.
      __m128i q[4];
      for (int k = 0; k < 4; ++k)
        q[k] = _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(x + j + 16 * k))), top));
      __m512i v = _mm512_inserti32x4(_mm512_castsi128_si512(q[0]), q[1], 1);
      v = _mm512_inserti32x4(_mm512_inserti32x4(v, q[2], 2), q[3], 3);
      _mm512_storeu_si512(y.qs + j, v);
    }
    // The 16 sums of 16 values: vpsadbw of the bytes + 128 gives sums of 8, added in pairs, less
    // 16 x 128.
    for (int j = 0; j < kQK_K; j += 64) {
      __m512i t = _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(y.qs + j), _mm512_set1_epi8(-128)),
                                  _mm512_setzero_si512());
      t = _mm512_maskz_compress_epi64(0x55, _mm512_add_epi64(t, _mm512_bsrli_epi128(t, 8)));
      const __m128i sums = _mm_sub_epi16(_mm512_cvtepi64_epi16(t), _mm_set1_epi16(16 * 128));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(y.bsums + j / 16), sums);
    }
    y.d = 1.0f / iscale;
  }
}

void matmul_kquant_avx512(const MatmulCall& c) {
  switch (c.w->type) {
    case DType::Q4_K:
      if (q4_k_blocks_order(c.w->rows)) return run_tiles16<Q4KTiles>(c, q4_k_group(c.order));
      break;
    case DType::IQ4_XS:
      if (iq4_xs_blocks_order(c.w->rows)) return run_tiles16<IQ4XSTiles>(c, 0);
      break;
    case DType::Q6_K:
    case DType::Q5_K: return matmul_kquant_lanes_avx512(c);
    default: break;
  }
  // (A Kx16 matrix has whole 16-row tiles, so it never gets here: the AVX2 code reads rows.)
  matmul_kquant_avx2(c);
}

}  // namespace clover::kernels::detail
