// What the AVX-512 K-quant kernels share (matmul_kquant_avx512.cpp: Q4_K and IQ4_XS;
// matmul_kquant_lanes_avx512.cpp: Q5_K and Q6_K): 16-row tiles whose vector lanes are the rows,
// read from the file's rows through 16 x 16 dword transposes (RowMajorTile) or from a Kx16 tile
// (kernels/repack.h) with plain loads (PackedTile). Include it only from files compiled for
// AVX-512 (F, BW, VL, VNNI, VBMI) and GFNI.
#pragma once
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace clover::kernels::detail {


#define CLOVER_INLINE inline __attribute__((always_inline))
#define CLOVER_UNROLL _Pragma("GCC unroll 16")

typedef int32_t unaligned_i32 __attribute__((aligned(1), may_alias));

// 16 x 16 dword transpose: on return v[i] holds dword i of the 16 input vectors (lane r = v_in[r]).
CLOVER_INLINE void transpose16(__m512i v[16]) {
  __m512i t[16];
  CLOVER_UNROLL
  for (int r = 0; r < 16; r += 2) {
    t[r] = _mm512_unpacklo_epi32(v[r], v[r + 1]);
    t[r + 1] = _mm512_unpackhi_epi32(v[r], v[r + 1]);
  }
  // u[4q + k], 128-bit lane L: dword 4L + k of rows 4q .. 4q + 3.
  __m512i u[16];
  CLOVER_UNROLL
  for (int r = 0; r < 16; r += 4) {
    u[r] = _mm512_unpacklo_epi64(t[r], t[r + 2]);
    u[r + 1] = _mm512_unpackhi_epi64(t[r], t[r + 2]);
    u[r + 2] = _mm512_unpacklo_epi64(t[r + 1], t[r + 3]);
    u[r + 3] = _mm512_unpackhi_epi64(t[r + 1], t[r + 3]);
  }
  CLOVER_UNROLL
  for (int k = 0; k < 4; ++k) {
    const __m512i x0 = _mm512_shuffle_i64x2(u[k], u[4 + k], 0x44), x1 = _mm512_shuffle_i64x2(u[k], u[4 + k], 0xEE);
    const __m512i y0 = _mm512_shuffle_i64x2(u[8 + k], u[12 + k], 0x44), y1 = _mm512_shuffle_i64x2(u[8 + k], u[12 + k], 0xEE);
    v[k] = _mm512_shuffle_i64x2(x0, y0, 0x88);
    v[4 + k] = _mm512_shuffle_i64x2(x0, y0, 0xDD);
    v[8 + k] = _mm512_shuffle_i64x2(x1, y1, 0x88);
    v[12 + k] = _mm512_shuffle_i64x2(x1, y1, 0xDD);
  }
}

// pshufb indices widening bytes 2p and 2p + 1 of every dword to an int16 pair (p = 0, 1).
constexpr std::array<int8_t, 64> pair_index(int p) {
  std::array<int8_t, 64> idx{};
  for (int i = 0; i < 64; i += 4) {
    const int base = (i % 16) + 2 * p;
    idx[i] = static_cast<int8_t>(base);
    idx[i + 1] = -1;
    idx[i + 2] = static_cast<int8_t>(base + 1);
    idx[i + 3] = -1;
  }
  return idx;
}
alignas(64) constexpr auto kPair0 = pair_index(0);
alignas(64) constexpr auto kPair1 = pair_index(1);

// Rows r's 16 bytes at p[r] + off: dword k of every row, lanes = rows (h[k]).
CLOVER_INLINE void transpose_headers(const uint8_t* const* rows, size_t off, __m512i h[4]) {
  __m512i z[4];
  CLOVER_UNROLL
  for (int g = 0; g < 4; ++g) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[g] + off)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[g + 4] + off)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[g + 8] + off)), 2);
    z[g] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[g + 12] + off)), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  h[0] = _mm512_unpacklo_epi64(t0, t2);
  h[1] = _mm512_unpackhi_epi64(t0, t2);
  h[2] = _mm512_unpacklo_epi64(t1, t3);
  h[3] = _mm512_unpackhi_epi64(t1, t3);
}

// 64 bytes at rows[r] + off (16 dwords, or 8 with `half`), transposed: v[i] = dword i of every row.
CLOVER_INLINE void transpose_rows(const uint8_t* const* rows, size_t off, __m512i v[16], bool half = false) {
  CLOVER_UNROLL
  for (int r = 0; r < 16; ++r)
    v[r] = half ? _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + off)))
                : _mm512_loadu_si512(rows[r] + off);
  transpose16(v);
}

// Where a 16-row tile's super-blocks are read from. Both give "dword j of super-block b of every
// row" as a vector (lanes = rows): RowMajorTile transposes the file's rows to get them, PackedTile
// loads them from a Kx16 tile (repack.h), which stores exactly those vectors.
template <size_t B>
struct RowMajorTile {
  const uint8_t* const* rows;  // the tile's 16 rows
  CLOVER_INLINE void header(int64_t b, __m512i h[4]) const { transpose_headers(rows, static_cast<size_t>(b) * B, h); }
  CLOVER_INLINE void dwords16(int64_t b, size_t j0, __m512i v[16]) const {  // dwords j0 .. j0 + 15
    transpose_rows(rows, static_cast<size_t>(b) * B + 4 * j0, v);
  }
  CLOVER_INLINE void dwords8(int64_t b, size_t j0, __m512i v[16]) const {  // dwords j0 .. j0 + 7 to v[0 .. 7]
    transpose_rows(rows, static_cast<size_t>(b) * B + 4 * j0, v, true);
  }
};
template <size_t B>
struct PackedTile {
  const uint8_t* tile;  // the tile's first byte
  CLOVER_INLINE const uint8_t* dword(int64_t b, size_t j) const { return tile + static_cast<size_t>(b) * 16 * B + 64 * j; }
  CLOVER_INLINE void header(int64_t b, __m512i h[4]) const {
    CLOVER_UNROLL
    for (int k = 0; k < 4; ++k) h[k] = _mm512_loadu_si512(dword(b, k));
  }
  CLOVER_INLINE void dwords16(int64_t b, size_t j0, __m512i v[16]) const {
    CLOVER_UNROLL
    for (int i = 0; i < 16; ++i) v[i] = _mm512_loadu_si512(dword(b, j0 + i));
  }
  CLOVER_INLINE void dwords8(int64_t b, size_t j0, __m512i v[16]) const {
    CLOVER_UNROLL
    for (int i = 0; i < 8; ++i) v[i] = _mm512_loadu_si512(dword(b, j0 + i));
  }
};

}  // namespace clover::kernels::detail
