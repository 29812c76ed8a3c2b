// AVX-512 matmul kernels (F + BW + VL + VNNI + VBMI + BF16); compiled with those target flags.
//
// Float weights, SumOrder::Gemm: kNW weight rows x NA activation rows, one 16-lane fp32
// accumulator per output element (tinyBLAS's order); SumOrder::VecDot: the types' vec_dot order.
// Every output element sees exactly the same instruction sequence whatever the tile shapes and
// the number of activation rows are, so results are batch-invariant.
//
// Q4_0 and Q8_0 follow llama.cpp's x86 orders exactly (matmul_internal.h): Q8_0 in 8 lanes per
// block (tile_q8_lanes8), Q4_0 with one exact block sum per output (tile_q4_0_blocks).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/convert.h"
#include "kernels/matmul_internal.h"
#include "kernels/prefetch.h"

namespace clover::kernels::detail {
namespace {

constexpr int kNW = 4;       // weight rows per micro-kernel
constexpr int kNAFloat = 4;  // activation rows per micro-kernel, float weights
constexpr size_t kPrefetchLead = 2048;  // bytes into the next tile the prefetch stream runs ahead

#define CLOVER_INLINE inline __attribute__((always_inline))
// The tile loops over NW / NA must become straight-line code with the accumulators in registers.
#define CLOVER_UNROLL _Pragma("GCC unroll 16")

// Software prefetch for decoding, where weights stream from DRAM: while a tile of kNW rows is
// computed, the next tile (the next kNW rows, contiguous in a weight matrix) is fetched at the
// same pace, a little ahead (kernels/prefetch.h: into L2, except Q8_0's). With the hardware
// prefetchers alone (they stop at 4 KiB pages) a single thread reached ~70% of the bandwidth of a
// plain streaming read.

// Float weights. F32 and F16: 16 values per step, fma. BF16: 32 values per step, vdpbf16ps.
template <DType T>
CLOVER_INLINE __m512 load_f(const uint8_t* p, int64_t k, int64_t n) {  // n: values left (masked if < step)
  if constexpr (T == DType::F32) {
    const float* f = reinterpret_cast<const float*>(p) + k;
    return n >= 16 ? _mm512_loadu_ps(f) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), f);
  } else if constexpr (T == DType::F16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p) + k;
    const __m256i v = n >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h))
                              : _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), h);
    return _mm512_cvtph_ps(v);
  } else {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p) + k;
    const __m512i v = n >= 32 ? _mm512_loadu_si512(h)
                              : _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << n) - 1), h);
    return _mm512_castsi512_ps(v);
  }
}

template <DType T>
CLOVER_INLINE __m512 fdot_step(__m512 acc, __m512 w, __m512 a) {
  if constexpr (T == DType::BF16) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_castps_si512(w), (__m512bh)_mm512_castps_si512(a));
  } else {
    return _mm512_fmadd_ps(w, a, acc);
  }
}

template <DType T, int NW, int NA>
void tile_float(const uint8_t* const* w, const uint8_t* const* a, int64_t cols, float* const* out, const uint8_t* pf) {
  constexpr int64_t kStep = T == DType::BF16 ? 32 : 16;
  constexpr int64_t kTileStepBytes = NW * kStep * (T == DType::F32 ? 4 : 2);
  __m512 acc[NW][NA];
  CLOVER_UNROLL
  for (int i = 0; i < NW; ++i)
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) acc[i][r] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + kStep <= cols; k += kStep, pf += kTileStepBytes) {
    prefetch_span<kTileStepBytes, Hint::L2>(pf);
    __m512 wv[NW];
    CLOVER_UNROLL
    for (int i = 0; i < NW; ++i) wv[i] = load_f<T>(w[i], k, kStep);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const __m512 av = load_f<T>(a[r], k, kStep);
      CLOVER_UNROLL
      for (int i = 0; i < NW; ++i) acc[i][r] = fdot_step<T>(acc[i][r], wv[i], av);
    }
  }
  if (k < cols) {
    __m512 wv[NW];
    CLOVER_UNROLL
    for (int i = 0; i < NW; ++i) wv[i] = load_f<T>(w[i], k, cols - k);
    CLOVER_UNROLL
    for (int r = 0; r < NA; ++r) {
      const __m512 av = load_f<T>(a[r], k, cols - k);
      CLOVER_UNROLL
      for (int i = 0; i < NW; ++i) acc[i][r] = fdot_step<T>(acc[i][r], wv[i], av);
    }
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r)
    CLOVER_UNROLL
    for (int i = 0; i < NW; ++i) out[r][i] = _mm512_reduce_add_ps(acc[i][r]);
}

using TileFn = void (*)(const uint8_t* const*, const uint8_t* const*, int64_t, float* const*, const uint8_t*);

template <DType T, int NW, int... NA>
constexpr std::array<TileFn, sizeof...(NA)> tile_table(std::integer_sequence<int, NA...>) {
  return {&tile_float<T, NW, NA + 1>...};
}

// ggml's row dot products (SumOrder::VecDot). F32: ggml_vec_dot_f32 (vec_dot_f32_avx512 below).
// F16: ggml_vec_dot_f16, 4 accumulators of 16 lanes
// over each 64 values, added (0 + 2) + (1 + 3), the lanes by _mm512_reduce_add_ps, the tail's
// products added in double. BF16: ggml_vec_dot_bf16, 2 vdpbf16ps accumulators over each 64
// values, each reduced and added in double, the tail likewise.

float vec_dot_f16(const uint16_t* x, const uint16_t* y, int64_t n) {
  const int64_t np = n & ~int64_t{63};
  __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 4; ++j)
      s[j] = _mm512_fmadd_ps(load_f<DType::F16>(reinterpret_cast<const uint8_t*>(x), i + 16 * j, 16),
                             load_f<DType::F16>(reinterpret_cast<const uint8_t*>(y), i + 16 * j, 16), s[j]);
  double sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3])));
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(_cvtsh_ss(x[i]) * _cvtsh_ss(y[i]));
  return static_cast<float>(sum);
}

float vec_dot_bf16(const uint16_t* x, const uint16_t* y, int64_t n) {
  const auto* xb = reinterpret_cast<const uint8_t*>(x);
  const auto* yb = reinterpret_cast<const uint8_t*>(y);
  __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    c1 = fdot_step<DType::BF16>(c1, load_f<DType::BF16>(xb, i, 32), load_f<DType::BF16>(yb, i, 32));
    c2 = fdot_step<DType::BF16>(c2, load_f<DType::BF16>(xb, i + 32, 32), load_f<DType::BF16>(yb, i + 32, 32));
  }
  double sum = _mm512_reduce_add_ps(c1);
  sum += static_cast<double>(_mm512_reduce_add_ps(c2));
  for (; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  return static_cast<float>(sum);
}

template <DType T>
void run_vec_dot(const MatmulCall& c) {
  using E = std::conditional_t<T == DType::F32, float, uint16_t>;
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  for (int64_t i = 0; i < c.n; ++i) {
    const auto* a = static_cast<const E*>(c.acts->row(c.act_index(i)));
    for (int64_t o = c.o_begin; o < c.o_end; ++o) {
      const auto* w = reinterpret_cast<const E*>(wbase + static_cast<size_t>(o) * c.w->row_stride);
      if constexpr (T == DType::F32) c.y[i * c.ldy + o] = vec_dot_f32_avx512(w, a, c.w->cols);
      else if constexpr (T == DType::F16) c.y[i * c.ldy + o] = vec_dot_f16(w, a, c.w->cols);
      else c.y[i * c.ldy + o] = vec_dot_bf16(w, a, c.w->cols);
    }
  }
}

// Q8_0 weights in ggml's order (tinyBLAS_Q0_AVX for dense products and ggml_vec_dot_q8_0_q8_0
// for expert products share it): per block, 8 int32 lanes of 4 byte products each (lane i: bytes
// 4i..4i+3, exact), converted to float and added into 8 float lanes with one fused multiply-add
// by the block's scale product (weight scale x activation scale), block after block; at the end
// the 8 lanes are added as hsum_float_8 does: lane i + lane i + 4, then (0 + 2) + (1 + 3). A
// register holds two activation rows (lanes 0-7 and 8-15) against one weight row.
struct Q8Pair {
  __m512i q;      // the two rows' bytes of one block
  __m512i nbias;  // -128 x each lane's byte sum: (w + 128) . a - 128 . a = w . a
  __m512 d;       // activation scales, 8 lanes each
};

CLOVER_INLINE Q8Pair q8_pair(const BlockQ8_0& a0, const BlockQ8_0& a1) {
  Q8Pair p;
  p.q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0.qs))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1.qs)), 1);
  const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), p.q);
  p.nbias = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 7));
  p.d = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(a0.d)), _mm256_set1_ps(_cvtsh_ss(a1.d)), 1);
  return p;
}

CLOVER_INLINE float hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// NW weight rows against NP pairs of activation rows (a[2j], a[2j + 1]); rows of an incomplete
// pair repeat and are not stored (out[r] is null).
template <int NW, int NP>
void tile_q8_lanes8(const BlockQ8_0* const* w, const BlockQ8_0* const* a, int64_t nb, float* const* out, const uint8_t* pf) {
  __m512 acc[NW][NP];
  CLOVER_UNROLL
  for (int i = 0; i < NW; ++i)
    CLOVER_UNROLL
    for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b, pf += NW * sizeof(BlockQ8_0)) {
    prefetch_span<NW * sizeof(BlockQ8_0), Hint::L1>(pf);
    Q8Pair p[NP];
    CLOVER_UNROLL
    for (int j = 0; j < NP; ++j) p[j] = q8_pair(a[2 * j][b], a[2 * j + 1][b]);
    CLOVER_UNROLL
    for (int i = 0; i < NW; ++i) {
      const __m512i wv = _mm512_xor_si512(
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i][b].qs))), flip);
      const __m512 dw = _mm512_set1_ps(_cvtsh_ss(w[i][b].d));
      CLOVER_UNROLL
      for (int j = 0; j < NP; ++j) {
        const __m512i s = _mm512_dpbusd_epi32(p[j].nbias, wv, p[j].q);
        acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(dw, p[j].d), _mm512_cvtepi32_ps(s), acc[i][j]);
      }
    }
  }
  CLOVER_UNROLL
  for (int i = 0; i < NW; ++i)
    CLOVER_UNROLL
    for (int j = 0; j < NP; ++j) {
      if (out[2 * j]) out[2 * j][i] = hsum8(_mm512_castps512_ps256(acc[i][j]));
      if (out[2 * j + 1]) out[2 * j + 1][i] = hsum8(_mm512_extractf32x8_ps(acc[i][j], 1));
    }
}

void run_q8_0_lanes8(const MatmulCall& c) {
  constexpr int kPairs = 2;
  constexpr int kRows = 2 * kPairs;
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK;
  const int64_t panel = panel_rows(static_cast<size_t>(nb) * sizeof(BlockQ8_0), kRows);
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    for (int64_t o = c.o_begin; o < c.o_end; o += kNW) {
      const int64_t nw = std::min<int64_t>(kNW, c.o_end - o);
      const BlockQ8_0* w[kNW];
      for (int64_t i = 0; i < nw; ++i)
        w[i] = reinterpret_cast<const BlockQ8_0*>(wbase + static_cast<size_t>(o + i) * c.w->row_stride);
      const uint8_t* pf = c.tile_prefetch(o, kNW, kPrefetchLead);
      for (int64_t i0 = p0; i0 < p1; i0 += kRows) {
        const int na = static_cast<int>(std::min<int64_t>(kRows, p1 - i0));
        const BlockQ8_0* a[kRows];
        float* out[kRows];
        for (int r = 0; r < kRows; ++r) {
          const int64_t i = i0 + std::min(r, na - 1);
          a[r] = static_cast<const BlockQ8_0*>(c.acts->row(c.act_index(i)));
          out[r] = r < na ? c.y + (i0 + r) * c.ldy + o : nullptr;
        }
        if (nw == kNW) {
          if (na > 2) tile_q8_lanes8<kNW, 2>(w, a, nb, out, pf);
          else tile_q8_lanes8<kNW, 1>(w, a, nb, out, pf);
        } else {
          for (int64_t i = 0; i < nw; ++i) {
            float* out1[kRows];
            for (int r = 0; r < kRows; ++r) out1[r] = out[r] ? out[r] + i : nullptr;
            if (na > 2) tile_q8_lanes8<1, 2>(&w[i], a, nb, out1, pf);
            else tile_q8_lanes8<1, 1>(&w[i], a, nb, out1, pf);
          }
        }
      }
    }
  }
}

// Q4_0 weights in llama.cpp's orders (matmul_internal.h). A matrix with a multiple of 8 rows is
// what llama.cpp repacks into 8-row interleaved blocks: per block, one exact int32 sum per output
// and one float accumulator per output. Here a tile of 16 weight rows has its lanes = rows: each
// row's block is read whole, vpermt2b gathers 4 rows' qs bytes in 4-byte groups (and their
// scales), a 128-bit transpose gives vector m = values 4m..4m+3 of every row, and the nibbles are
// split; vpdpbusd against the activation's 4 bytes of group m, broadcast, adds up all 16 rows'
// block sums. The nibble bias (+8) is removed by starting from -8 x the activation block's byte
// sum (ActRows::q4_bias).
//
// The vpermt2b indices, over a pair of registers holding 4 rows' blocks (32 bytes read from each
// block's start: rows j = 0, 1 in the first register, 2, 3 in the second). q4_qs_index: byte
// m * 16 + j * 4 + t is qs byte 4m + t of row j (block byte 2 + 4m + t). q4_d_index(g): bytes
// 8g..8g+7 are the 4 rows' fp16 scales (block bytes 0, 1), for the rows 4g..4g+3 of a tile.
constexpr std::array<uint8_t, 64> q4_qs_index() {
  std::array<uint8_t, 64> idx{};
  for (int m = 0; m < 4; ++m)
    for (int j = 0; j < 4; ++j)
      for (int t = 0; t < 4; ++t) idx[m * 16 + j * 4 + t] = static_cast<uint8_t>(j * 32 + 2 + 4 * m + t);
  return idx;
}
constexpr std::array<uint8_t, 64> q4_d_index(int g) {
  std::array<uint8_t, 64> idx{};
  for (int j = 0; j < 4; ++j)
    for (int t = 0; t < 2; ++t) idx[8 * g + 2 * j + t] = static_cast<uint8_t>(j * 32 + t);
  return idx;
}
alignas(64) constexpr auto kQ4QsIdx = q4_qs_index();
alignas(64) constexpr std::array<std::array<uint8_t, 64>, 4> kQ4DIdx = {q4_d_index(0), q4_d_index(1), q4_d_index(2),
                                                                         q4_d_index(3)};

// 16 rows of a tile: rows 4g..4g+3 at row[g], row[g] + stride, + 2 stride, + 3 stride.
struct Q4Rows {
  const uint8_t* row[4];
  size_t stride;
};

// One block column of a 16-row tile: vector m of z holds values 4m..4m+3 of every row (qs bytes:
// low nibbles, and in the high nibbles values 16 + 4m..), dw the 16 rows' scales. Adds each
// activation row's 16 block sums, scaled, into acc[r].
template <int NA>
CLOVER_INLINE void q4_0_block_column(__m512 (&acc)[NA], const __m512i (&z)[4], __m512 dw, const BlockQ8_0* const* a,
                                     const int32_t* const* nbias, const float* const* ad, int64_t b) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512i wm[8];
  CLOVER_UNROLL
  for (int g = 0; g < 4; ++g) {
    wm[g] = _mm512_and_si512(z[g], m4);
    wm[g + 4] = _mm512_and_si512(_mm512_srli_epi16(z[g], 4), m4);
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) {
    // The activation's 4-byte groups, broadcast.
    typedef int32_t unaligned_i32 __attribute__((aligned(1), may_alias));
    const auto* aq = reinterpret_cast<const unaligned_i32*>(a[r][b].qs);
    // Four independent chains (integer sums are exact in any order), then added.
    __m512i part[4] = {_mm512_set1_epi32(nbias[r][b]), _mm512_setzero_si512(), _mm512_setzero_si512(),
                       _mm512_setzero_si512()};
    CLOVER_UNROLL
    for (int m = 0; m < 8; ++m) part[m % 4] = _mm512_dpbusd_epi32(part[m % 4], wm[m], _mm512_set1_epi32(aq[m]));
    const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(part[0], part[1]), _mm512_add_epi32(part[2], part[3]));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(ad[r][b])), acc[r]);
  }
}

// A tile of 16 row-major rows: each block column gathered from the rows' blocks.
template <int NA>
void tile_q4_0_blocks(const Q4Rows& w, const BlockQ8_0* const* a, const int32_t* const* nbias, const float* const* ad,
                      int64_t nb, float* const* out, const uint8_t* pf) {
  const __m512i qs_idx = _mm512_load_si512(kQ4QsIdx.data());
  constexpr __mmask32 kBlock = (1u << sizeof(BlockQ4_0)) - 1;  // 18 bytes: nothing past a block is read
  const size_t s = w.stride, s3 = 3 * w.stride;
  __m512 acc[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, pf += 16 * sizeof(BlockQ4_0)) {
    prefetch_span<16 * sizeof(BlockQ4_0), Hint::L2>(pf);
    const size_t off = static_cast<size_t>(b) * sizeof(BlockQ4_0);
    __m512i y[4], d = _mm512_setzero_si512();
    CLOVER_UNROLL
    for (int g = 0; g < 4; ++g) {
      const uint8_t* p = w.row[g] + off;
      const __m512i lo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(kBlock, p)),
                                            _mm256_maskz_loadu_epi8(kBlock, p + s), 1);
      const __m512i hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(kBlock, p + 2 * s)),
                                            _mm256_maskz_loadu_epi8(kBlock, p + s3), 1);
      y[g] = _mm512_permutex2var_epi8(lo, qs_idx, hi);  // [m 0: rows 0-3 | m 1 | m 2 | m 3], 4 bytes each
      d = _mm512_or_si512(d, _mm512_maskz_permutex2var_epi8(__mmask64{0xff} << (8 * g), lo,
                                                            _mm512_load_si512(kQ4DIdx[g].data()), hi));
    }
    const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(d));
    // 128-bit transpose: z[m] = chunk m of y[0], y[1], y[2], y[3] (rows 0-15 of group m).
    const __m512i t01 = _mm512_shuffle_i64x2(y[0], y[1], 0x44), t23 = _mm512_shuffle_i64x2(y[2], y[3], 0x44);
    const __m512i u01 = _mm512_shuffle_i64x2(y[0], y[1], 0xEE), u23 = _mm512_shuffle_i64x2(y[2], y[3], 0xEE);
    const __m512i z[4] = {_mm512_shuffle_i64x2(t01, t23, 0x88), _mm512_shuffle_i64x2(t01, t23, 0xDD),
                          _mm512_shuffle_i64x2(u01, u23, 0x88), _mm512_shuffle_i64x2(u01, u23, 0xDD)};
    q4_0_block_column<NA>(acc, z, dw, a, nbias, ad, b);
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) _mm512_storeu_ps(out[r], acc[r]);
}

// A Q4_0x16 tile (repack.h): each block column is one 32-byte load of the scales and four 64-byte
// loads of the values, already in the vectors tile_q4_0_blocks builds, so the sums are its bits.
template <int NA>
void tile_q4_0_x16(const uint8_t* tile, const BlockQ8_0* const* a, const int32_t* const* nbias, const float* const* ad,
                   int64_t nb, float* const* out, const uint8_t* pf) {
  const uint8_t* qs = tile + static_cast<size_t>(nb) * 32;
  __m512 acc[NA];
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, pf += 16 * sizeof(BlockQ4_0)) {
    prefetch_span<16 * sizeof(BlockQ4_0), Hint::L2>(pf);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + b * 32)));
    const uint8_t* q = qs + b * 256;
    const __m512i z[4] = {_mm512_loadu_si512(q), _mm512_loadu_si512(q + 64), _mm512_loadu_si512(q + 128),
                          _mm512_loadu_si512(q + 192)};
    q4_0_block_column<NA>(acc, z, dw, a, nbias, ad, b);
  }
  CLOVER_UNROLL
  for (int r = 0; r < NA; ++r) _mm512_storeu_ps(out[r], acc[r]);
}

// A tile of either layout (a Q4_0x16 tile starts at its first row's bytes, w.row[0]).
template <int NA>
void q4_0_tile(bool packed, const Q4Rows& w, const BlockQ8_0* const* a, const int32_t* const* nbias,
               const float* const* ad, int64_t nb, float* const* out, const uint8_t* pf) {
  if (packed) tile_q4_0_x16<NA>(w.row[0], a, nbias, ad, nb, out, pf);
  else tile_q4_0_blocks<NA>(w, a, nbias, ad, nb, out, pf);
}

void run_q4_0(const MatmulCall& c) {
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t nb = c.w->cols / kQK;
  if (!q4_0_blocks_order(c.w->rows)) {  // llama.cpp's unrepacked order; small matrices only in practice
    for (int64_t i = 0; i < c.n; ++i) {
      const auto* a = static_cast<const BlockQ8_0*>(c.acts->row(c.act_index(i)));
      for (int64_t o = c.o_begin; o < c.o_end; ++o)
        c.y[i * c.ldy + o] =
            q4_0_dot_lanes8_ref(reinterpret_cast<const BlockQ4_0*>(wbase + static_cast<size_t>(o) * c.w->row_stride), a, nb);
    }
    return;
  }
  constexpr int kNA8 = 8;
  const int64_t panel = panel_rows(static_cast<size_t>(nb) * sizeof(BlockQ8_0), kNA8);
  // Tiles of 16 rows from a multiple of 8 (of 16 when repacked: whole tiles only); rows outside
  // [o_begin, o_end) or past the matrix are computed into scratch (a last 8-row tile repeats its
  // rows) and dropped.
  const bool packed = c.w->layout == Layout::Q4_0x16;
  const int64_t t_begin = packed ? c.o_begin / 16 * 16 : c.o_begin / 8 * 8;
  for (int64_t p0 = 0; p0 < c.n; p0 += panel) {
    const int64_t p1 = std::min(c.n, p0 + panel);
    for (int64_t o = t_begin; o < c.o_end; o += 16) {
      const int64_t rows = std::min<int64_t>(16, c.w->rows - o);  // 8 or 16
      Q4Rows w{};  // a packed tile is read from row[0] on; row-major rows are gathered from all four
      w.stride = c.w->row_stride;
      for (int g = 0; g < (packed ? 1 : 4); ++g)
        w.row[g] = wbase + static_cast<size_t>(o + (4 * g < rows ? 4 * g : 4 * g - 8)) * c.w->row_stride;
      const uint8_t* pf = c.tile_prefetch(o, 16, kPrefetchLead);
      const bool whole = rows == 16 && o >= c.o_begin && o + 16 <= c.o_end;
      for (int64_t i0 = p0; i0 < p1; i0 += kNA8) {
        const int na = static_cast<int>(std::min<int64_t>(kNA8, p1 - i0));
        const BlockQ8_0* a[kNA8];
        const int32_t* nbias[kNA8];
        const float* ad[kNA8];
        float* out[kNA8];
        alignas(64) float tmp[kNA8][16];
        for (int r = 0; r < na; ++r) {
          const int64_t idx = c.act_index(i0 + r);
          a[r] = static_cast<const BlockQ8_0*>(c.acts->row(idx));
          nbias[r] = c.acts->q4_bias(idx);
          ad[r] = c.acts->scales(idx);
          out[r] = whole ? c.y + (i0 + r) * c.ldy + o : tmp[r];
        }
        switch (na) {
          case 8: q4_0_tile<8>(packed, w, a, nbias, ad, nb, out, pf); break;
          case 7: q4_0_tile<7>(packed, w, a, nbias, ad, nb, out, pf); break;
          case 6: q4_0_tile<6>(packed, w, a, nbias, ad, nb, out, pf); break;
          case 5: q4_0_tile<5>(packed, w, a, nbias, ad, nb, out, pf); break;
          case 4: q4_0_tile<4>(packed, w, a, nbias, ad, nb, out, pf); break;
          case 3: q4_0_tile<3>(packed, w, a, nbias, ad, nb, out, pf); break;
          case 2: q4_0_tile<2>(packed, w, a, nbias, ad, nb, out, pf); break;
          default: q4_0_tile<1>(packed, w, a, nbias, ad, nb, out, pf); break;
        }
        if (!whole)
          for (int r = 0; r < na; ++r)
            for (int64_t i = std::max(o, c.o_begin); i < std::min({o + 16, o + rows, c.o_end}); ++i)
              c.y[(i0 + r) * c.ldy + i] = tmp[r][i - o];
      }
    }
  }
}

// Float weights: rows in tiles of kNW (a last partial tile row by row), activation rows in chunks
// of up to kNAFloat; the kNW weight rows stay in L1 while every activation chunk passes over them.
template <DType T>
void run_type(const MatmulCall& c) {
  if (c.order == SumOrder::VecDot) return run_vec_dot<T>(c);
  constexpr int kNA = kNAFloat;
  static constexpr auto kTiles4 = tile_table<T, kNW>(std::make_integer_sequence<int, kNA>{});
  static constexpr auto kTiles1 = tile_table<T, 1>(std::make_integer_sequence<int, kNA>{});

  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  const int64_t cols = c.w->cols;
  // Long batches (prefill) in panels of activation rows that stay in L2 while all weight tiles
  // pass; each output element is still computed by one tile call, so panels change no result.
  const int64_t panel = panel_rows(dtype_row_bytes(c.acts->type(), cols), kNA);
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

}  // namespace

float vec_dot_f32_avx512(const float* x, const float* y, int64_t n) {
  const int64_t np = n & ~int64_t{63};
  __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 4; ++j) s[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16 * j), _mm512_loadu_ps(y + i + 16 * j), s[j]);
  const float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3])));
  return dot_tail(x, y, np, n, sum);
}

void convert_q8_0_avx512(const float* x, int64_t cols, BlockQ8_0* row) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    const float* xb = x + b * kQK;
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (id <= 3.0e38f) {
      // cvtps2dq rounds half to even (MXCSR default), like _mm256_round_ps + cvtps in ggml.
      const __m512 m = _mm512_set1_ps(id);
      row[b].d = static_cast<uint16_t>(_cvtss_sh(amax / 127.0f, 0));
      const __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, m)));
      const __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, m)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row[b].qs), q0);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row[b].qs + 16), q1);
    } else {
      quantize_row_q8_0_activation(xb, &row[b], kQK);  // tiny amax: the scalar code has the x86 edge cases
    }
  }
}

void matmul_avx512(const MatmulCall& c) {
  if (dtype_is_kquant(c.w->type)) return matmul_kquant_avx512(c);  // matmul_kquant_avx512.cpp
  if (dtype_is_legacy_extra(c.w->type)) return matmul_legacy_avx2(c);  // matmul_legacy_avx2.cpp
  switch (c.w->type) {
    case DType::F32: run_type<DType::F32>(c); break;
    case DType::F16: run_type<DType::F16>(c); break;
    case DType::BF16: run_type<DType::BF16>(c); break;
    case DType::Q4_0: run_q4_0(c); break;
    case DType::Q8_0: run_q8_0_lanes8(c); break;
    default: break;
  }
}

}  // namespace clover::kernels::detail
