// AVX2 + FMA + F16C matmul kernels; compiled with those target flags.
//
// Same structure as the AVX-512 file: kNW weight rows x NA activation rows per micro-kernel, one
// 8-lane fp32 accumulator per output element, a fixed final reduction, so every output element
// gets the same instruction sequence whatever the tile shape (batch invariance).
//
// Quantised weights use the plain ggml layouts, one block (32 values) per step (Q4_0 matrices of a
// multiple of 8 rows, in the file's layout or as Q4_0x16 tiles: run_q4_0_blocks below):
//   Q4_0: nibbles q (unsigned) x activation bytes with maddubs, minus 8 * sum(a);
//   Q8_0: |a| x sign(w, a) with maddubs (ggml's sign trick; weights never hold -128).
// then, per block, acc = fma(float(int32 lanes), d_w * d_a, acc) as ggml's x86 vec_dot does.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/convert.h"
#include "kernels/matmul_internal.h"
#include "kernels/prefetch.h"

namespace clover::kernels::detail {
namespace {

constexpr int kNW = 4;       // weight rows per micro-kernel
constexpr int kNAQuant = 2;  // activation rows per micro-kernel (16 ymm registers)
constexpr int kNAFloat = 2;
// The prefetch stream runs this far into the next tile's weights, as in matmul_avx512.cpp, but
// into L1: on the Zen 4 of session 18, L2 (kernels/prefetch.h) did not help these kernels.
constexpr size_t kPrefetchLead = 2048;

#define CLOVER_INLINE inline __attribute__((always_inline))
// The tile loops over NW / NA must become straight-line code with the accumulators in registers.
#define CLOVER_UNROLL _Pragma("GCC unroll 16")

// An fp16 scale converted and broadcast to 8 lanes.
CLOVER_INLINE __m256 broadcast_fp16(uint16_t h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }

CLOVER_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <DType T, int NW, int NA>
void tile_quant(const uint8_t* const* w, const uint8_t* const* a, int64_t cols, float* const* out, const uint8_t* pf) {
  constexpr int64_t kBlockBytes = T == DType::Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  constexpr int64_t kPfStep = 2 * NW * kBlockBytes;  // prefetched every other block
  __m256 acc[NW][NA];
  CLOVER_UNROLL
  for (int i = 0; i < NW; ++i)
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) acc[i][r] = _mm256_setzero_ps();
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i eights = _mm256_set1_epi8(8);
  const int64_t nb = cols / kQK;
  for (int64_t b = 0; b < nb; ++b) {
    if (b % 2 == 0) {
      prefetch_span<kPfStep, Hint::L1>(pf);
      pf += kPfStep;
    }
    // Per activation row: its block, scale and (Q4_0) 8 * sum(a) per lane. Weight rows outer,
    // activation bytes re-read from L1, to leave the 16 registers to the 4 x 2 accumulators.
    const BlockQ8_0* ab[NA];
    __m256 da[NA];
    __m256i bias[NA];
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      ab[r] = reinterpret_cast<const BlockQ8_0*>(a[r]) + b;
      da[r] = broadcast_fp16(ab[r]->d);
      if constexpr (T == DType::Q4_0) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[r]->qs));
        bias[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(eights, av), ones16);
      }
    }
    CLOVER_UNROLL
    for (int i = 0; i < NW; ++i) {
      __m256i wq;
      __m256 dw;
      if constexpr (T == DType::Q4_0) {
        // qs in both halves, the upper half shifted right by 4: values 0..15 | 16..31.
        const BlockQ4_0* blk = reinterpret_cast<const BlockQ4_0*>(w[i]) + b;
        const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs)));
        wq = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), m4);
        dw = broadcast_fp16(blk->d);
      } else {
        const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(w[i]) + b;
        wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
        dw = broadcast_fp16(blk->d);
      }
      CLOVER_UNROLL
      for (int r = 0; r < NA; ++r) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[r]->qs));
        __m256i s;
        if constexpr (T == DType::Q4_0) {
          s = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wq, av), ones16), bias[r]);
        } else {
          s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(av, av), _mm256_sign_epi8(wq, av)), ones16);
        }
        acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, da[r]), acc[i][r]);
      }
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r)
    CLOVER_UNROLL
    for (int i = 0; i < NW; ++i) out[r][i] = hsum(acc[i][r]);
}

// 8 values starting at value k; n < 8 values left are zero-padded (nothing past them is read).
template <DType T>
CLOVER_INLINE __m256 load_f(const uint8_t* p, int64_t k, int64_t n) {
  if constexpr (T == DType::F32) {
    const float* f = reinterpret_cast<const float*>(p) + k;
    if (n >= 8) return _mm256_loadu_ps(f);
    alignas(32) static constexpr int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_maskload_ps(f, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n)));
  } else {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p) + k;
    __m128i v;
    if (n >= 8) {
      v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
    } else {
      alignas(16) uint16_t tmp[8] = {};
      std::memcpy(tmp, h, static_cast<size_t>(n) * 2);
      v = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
    }
    if constexpr (T == DType::F16) {
      return _mm256_cvtph_ps(v);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    }
  }
}

template <DType T, int NW, int NA>
void tile_float(const uint8_t* const* w, const uint8_t* const* a, int64_t cols, float* const* out, const uint8_t* pf) {
  constexpr int64_t kTileStepBytes = NW * 8 * (T == DType::F32 ? 4 : 2);
  __m256 acc[NW][NA];
  CLOVER_UNROLL
  for (int i = 0; i < NW; ++i)
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) acc[i][r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < cols; k += 8, pf += kTileStepBytes) {
    prefetch_span<kTileStepBytes, Hint::L1>(pf);
    const int64_t n = cols - k;
    __m256 wv[NW];
    CLOVER_UNROLL
    for (int i = 0; i < NW; ++i) wv[i] = load_f<T>(w[i], k, n);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const __m256 av = load_f<T>(a[r], k, n);
      CLOVER_UNROLL
      for (int i = 0; i < NW; ++i) acc[i][r] = _mm256_fmadd_ps(wv[i], av, acc[i][r]);
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r)
    CLOVER_UNROLL
    for (int i = 0; i < NW; ++i) out[r][i] = hsum(acc[i][r]);
}

template <DType T, int NW, int NA>
void tile(const uint8_t* const* w, const uint8_t* const* a, int64_t cols, float* const* out, const uint8_t* pf) {
  if constexpr (T == DType::Q4_0 || T == DType::Q8_0) {
    tile_quant<T, NW, NA>(w, a, cols, out, pf);
  } else {
    tile_float<T, NW, NA>(w, a, cols, out, pf);
  }
}

using TileFn = void (*)(const uint8_t* const*, const uint8_t* const*, int64_t, float* const*, const uint8_t*);

template <DType T, int NW, int... NA>
constexpr std::array<TileFn, sizeof...(NA)> tile_table(std::integer_sequence<int, NA...>) {
  return {&tile<T, NW, NA + 1>...};
}

template <DType T>
void run_type(const MatmulCall& c) {
  constexpr bool kQuant = T == DType::Q4_0 || T == DType::Q8_0;
  constexpr int kNA = kQuant ? kNAQuant : kNAFloat;
  static constexpr auto kTiles4 = tile_table<T, kNW>(std::make_integer_sequence<int, kNA>{});
  static constexpr auto kTiles1 = tile_table<T, 1>(std::make_integer_sequence<int, kNA>{});

  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t cols = c.w->cols;
  const size_t act_row_bytes = dtype_row_bytes(c.acts->type(), cols);
  // Long batches (prefill) in panels of activation rows that stay in L2 while all weight tiles
  // pass; each output element is still computed by one tile call, so panels change no result.
  const int64_t panel = panel_rows(act_row_bytes, kNA);
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    for (int64_t o = c.o_begin; o < c.o_end; o += kNW) {
      const int64_t nw = std::min<int64_t>(kNW, c.o_end - o);
      for (int64_t i0 = p0; i0 < p1; i0 += kNA) {
        const int na = static_cast<int>(std::min<int64_t>(kNA, p1 - i0));
        const uint8_t* a[kNA];
        float* out[kNA];
        for (int r = 0; r < na; ++r) {
          a[r] = static_cast<const uint8_t*>(c.acts->row(c.act_index(i0 + r)));
          out[r] = c.y + (i0 + r) * c.ldy + o;
        }
        if (nw == kNW) {
          const uint8_t* w[kNW];
          for (int i = 0; i < kNW; ++i) w[i] = wbase + static_cast<size_t>(o + i) * c.w->row_stride;
          kTiles4[na - 1](w, a, cols, out, w[0] + kNW * c.w->row_stride + kPrefetchLead);
        } else {
          for (int64_t i = 0; i < nw; ++i) {
            const uint8_t* w1 = wbase + static_cast<size_t>(o + i) * c.w->row_stride;
            float* out1[kNA];
            for (int r = 0; r < na; ++r) out1[r] = out[r] + i;
            kTiles1[na - 1](&w1, a, cols, out1, w1 + c.w->row_stride + kPrefetchLead);
          }
        }
      }
    }
  }
}

// Q4_0 matrices of a multiple of 8 rows, in llama.cpp's blocks order (matmul_internal.h), the
// AVX-512 kernel's arithmetic on 8 rows at a time, one row per 32-bit lane: per block, vector m
// (0..3) holds qs bytes 4m..4m+3 of each row; its low nibbles (values 4m..) times the activation's
// bytes 4m..4m+3 and its high nibbles (values 16 + 4m..) times bytes 16 + 4m.., broadcast, with
// maddubs; the eight int16 results are added (|sum| <= 8 x 2 x 15 x 127 = 30480: exact), widened
// and started from -8 x the activation block's byte sum (ActRows::q4_bias): the exact int32 block
// sum. Then acc = fma(float(sum), d_w x d_a, acc), block after block: the bits of
// q4_0_dot_blocks_ref and of the AVX-512 path. Against the lanes kernel above (per row and block:
// a broadcast, a shift, the scale, and per activation row six operations for 32 products) this
// is ~20 operations per activation row for 256 products, plus the 8 rows' unpacking.
typedef int32_t unaligned_i32 __attribute__((aligned(1), may_alias));

template <int NA>
CLOVER_INLINE void q4_0_column8(__m256 (&acc)[NA], const __m256i (&z)[4], __m256 dw, const BlockQ8_0* const* a,
                                const int32_t* const* nbias, const float* const* ad, int64_t b) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), ones16 = _mm256_set1_epi16(1);
  __m256i wm[8];
  CLOVER_UNROLL
  for (int g = 0; g < 4; ++g) {
    wm[g] = _mm256_and_si256(z[g], m4);
    wm[g + 4] = _mm256_and_si256(_mm256_srli_epi16(z[g], 4), m4);
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) {
    const auto* aq = reinterpret_cast<const unaligned_i32*>(a[r][b].qs);
    __m256i p0 = _mm256_maddubs_epi16(wm[0], _mm256_set1_epi32(aq[0]));
    __m256i p1 = _mm256_maddubs_epi16(wm[1], _mm256_set1_epi32(aq[1]));
    CLOVER_UNROLL
    for (int m = 2; m < 8; m += 2) {
      p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(wm[m], _mm256_set1_epi32(aq[m])));
      p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(wm[m + 1], _mm256_set1_epi32(aq[m + 1])));
    }
    const __m256i sum = _mm256_add_epi32(_mm256_set1_epi32(nbias[r][b]), _mm256_madd_epi16(_mm256_add_epi16(p0, p1), ones16));
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(ad[r][b])), acc[r]);
  }
}

// Two 16-byte loads in one register: p in the low half, q in the high half.
CLOVER_INLINE __m256i load_pair(const uint8_t* p, const uint8_t* q) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)), 1);
}

// 8 row-major rows (row, row + stride, ..): each block column transposed in registers. Rows j and
// j + 4 share a register; dword unpacks then qword unpacks put qs dword m of row j in lane j of
// z[m], and word unpacks the 8 scales in order.
template <int NA>
void tile_q4_0_rows8(const uint8_t* row, size_t stride, const BlockQ8_0* const* a, const int32_t* const* nbias,
                     const float* const* ad, int64_t nb, float* const* out, const uint8_t* pf) {
  __m256 acc[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps();
  const uint8_t* rj[8];
  for (int j = 0; j < 8; ++j) rj[j] = row + j * stride;
  for (int64_t b = 0; b < nb; ++b, pf += 8 * sizeof(BlockQ4_0)) {
    prefetch_span<8 * sizeof(BlockQ4_0), Hint::L1>(pf);
    const size_t off = static_cast<size_t>(b) * sizeof(BlockQ4_0);
    __m256i y[4], h[4];
    CLOVER_UNROLL
    for (int j = 0; j < 4; ++j) {
      y[j] = load_pair(rj[j] + off + 2, rj[j + 4] + off + 2);  // qs
      h[j] = load_pair(rj[j] + off, rj[j + 4] + off);          // d in the first word
    }
    const __m256i a01 = _mm256_unpacklo_epi32(y[0], y[1]), b01 = _mm256_unpackhi_epi32(y[0], y[1]);
    const __m256i a23 = _mm256_unpacklo_epi32(y[2], y[3]), b23 = _mm256_unpackhi_epi32(y[2], y[3]);
    const __m256i z[4] = {_mm256_unpacklo_epi64(a01, a23), _mm256_unpackhi_epi64(a01, a23),
                          _mm256_unpacklo_epi64(b01, b23), _mm256_unpackhi_epi64(b01, b23)};
    // Words 0-3 of each half: d of rows 0-3 (low), 4-7 (high); qwords 0 and 2 joined.
    const __m256i d = _mm256_unpacklo_epi32(_mm256_unpacklo_epi16(h[0], h[1]), _mm256_unpacklo_epi16(h[2], h[3]));
    const __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(d, 0x08)));
    q4_0_column8<NA>(acc, z, dw, a, nbias, ad, b);
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) _mm256_storeu_ps(out[r], acc[r]);
}

// Rows 8h..8h + 7 of a Q4_0x16 tile (repack.h): per block column, their 8 scales are 16 bytes and
// their values four 32-byte loads, the vectors tile_q4_0_rows8 builds.
template <int NA>
void tile_q4_0_x16_half(const uint8_t* tile, int half, const BlockQ8_0* const* a, const int32_t* const* nbias,
                        const float* const* ad, int64_t nb, float* const* out, const uint8_t* pf) {
  const uint8_t* qs = tile + static_cast<size_t>(nb) * 32 + half * 32;
  const uint8_t* sc = tile + half * 16;
  __m256 acc[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, pf += 8 * sizeof(BlockQ4_0)) {
    prefetch_span<8 * sizeof(BlockQ4_0), Hint::L1>(pf);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + b * 32)));
    const uint8_t* q = qs + b * 256;
    const __m256i z[4] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 128)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 192))};
    q4_0_column8<NA>(acc, z, dw, a, nbias, ad, b);
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) _mm256_storeu_ps(out[r], acc[r]);
}

template <int NA>
void q4_0_tile8(const uint8_t* tile, int half, const uint8_t* row, size_t stride, const BlockQ8_0* const* a,
                const int32_t* const* nbias, const float* const* ad, int64_t nb, float* const* out, const uint8_t* pf) {
  if (tile) tile_q4_0_x16_half<NA>(tile, half, a, nbias, ad, nb, out, pf);
  else tile_q4_0_rows8<NA>(row, stride, a, nbias, ad, nb, out, pf);
}

void run_q4_0_blocks(const MatmulCall& c) {
  constexpr int kNA8 = 4;  // activation rows per pass: 4 accumulators beside the 8 unpacked vectors
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK;
  const size_t stride = c.w->row_stride;
  const bool packed = c.w->layout == Layout::Q4_0x16;
  const int64_t panel = panel_rows(static_cast<size_t>(nb) * sizeof(BlockQ8_0), kNA8);
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    // Groups of 8 rows from a multiple of 8 (the matrix has whole groups); rows outside
    // [o_begin, o_end) are computed into scratch and dropped.
    for (int64_t o = c.o_begin / 8 * 8; o < c.o_end; o += 8) {
      const uint8_t* row = wbase + static_cast<size_t>(o) * stride;
      const uint8_t* tile = packed ? wbase + static_cast<size_t>(o / 16 * 16) * stride : nullptr;
      const int half = static_cast<int>(o % 16 / 8);
      const uint8_t* pf = c.tile_prefetch(o, 8, kPrefetchLead);
      const bool whole = o >= c.o_begin && o + 8 <= c.o_end;
      for (int64_t i0 = p0; i0 < p1; i0 += kNA8) {
        const int na = static_cast<int>(std::min<int64_t>(kNA8, p1 - i0));
        const BlockQ8_0* a[kNA8];
        const int32_t* nbias[kNA8];
        const float* ad[kNA8];
        float* out[kNA8];
        alignas(32) float tmp[kNA8][8];
        for (int r = 0; r < na; ++r) {
          const int64_t idx = c.act_index(i0 + r);
          a[r] = static_cast<const BlockQ8_0*>(c.acts->row(idx));
          nbias[r] = c.acts->q4_bias(idx);
          ad[r] = c.acts->scales(idx);
          out[r] = whole ? c.y + (i0 + r) * c.ldy + o : tmp[r];
        }
        switch (na) {
          case 4: q4_0_tile8<4>(tile, half, row, stride, a, nbias, ad, nb, out, pf); break;
          case 3: q4_0_tile8<3>(tile, half, row, stride, a, nbias, ad, nb, out, pf); break;
          case 2: q4_0_tile8<2>(tile, half, row, stride, a, nbias, ad, nb, out, pf); break;
          default: q4_0_tile8<1>(tile, half, row, stride, a, nbias, ad, nb, out, pf); break;
        }
        if (!whole)
          for (int r = 0; r < na; ++r)
            for (int64_t i = std::max(o, c.o_begin); i < std::min(o + 8, c.o_end); ++i) c.y[(i0 + r) * c.ldy + i] = tmp[r][i - o];
      }
    }
  }
}

}  // namespace

void convert_f16_f16c(const float* x, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = static_cast<uint16_t>(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

void convert_bf16_avx2(const float* x, int64_t n, uint16_t* dst) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i bias = _mm256_add_epi32(round, _mm256_and_si256(hi, one));  // 0x7fff + lowest kept bit
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    const __m256i v = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), is_nan);
    // 8 x u32 (each < 2^16) -> 8 x u16: pack within 128-bit lanes, then gather the two halves.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) dst[i] = fp32_to_bf16(x[i]);
}

void matmul_avx2(const MatmulCall& c) {
  if (dtype_is_kquant(c.w->type)) return matmul_kquant_avx2(c);  // matmul_kquant_avx2.cpp
  if (dtype_is_legacy_extra(c.w->type)) return matmul_legacy_avx2(c);  // matmul_legacy_avx2.cpp
  switch (c.w->type) {
    case DType::F32: run_type<DType::F32>(c); break;
    case DType::F16: run_type<DType::F16>(c); break;
    case DType::BF16: run_type<DType::BF16>(c); break;
    case DType::Q4_0:
      if (q4_0_blocks_order(c.w->rows)) run_q4_0_blocks(c);  // llama.cpp's order for these (and the only one for Q4_0x16)
      else run_type<DType::Q4_0>(c);
      break;
    case DType::Q8_0: run_type<DType::Q8_0>(c); break;
    default: break;
  }
}

}  // namespace clover::kernels::detail
