// AVX-512 gated delta rule steps in ggml-cpu's operation order (gdn.h): the bits equal
// gdn_step_ref's. Rows are independent of each other, so the out-of-order core overlaps the
// dependency chains of consecutive rows.
#include <immintrin.h>

#include <cmath>

#include "kernels/gdn_internal.h"

namespace clover::kernels::detail {
namespace {

inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1); }

// The end of ggml_vec_dot_f32: the 4 accumulators added (0 + 2) + (1 + 3), then the 16 lanes in
// the tree l + 8, + 4, + 2, + 1.
inline float reduce(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 v = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

// The row operations of this instruction set, for gdn_rows (gdn_internal.h).
struct Avx512Ops {
  static float dot(const float* x, const float* y, int64_t n) { return vec_dot_f32_avx512(x, y, n); }

  static void scale_row(float* row, float decay, int64_t d) {
    const __m512 m = _mm512_set1_ps(decay);
    for (int64_t i = 0; i < d; i += 16) {
      const __mmask16 k = tail_mask(d - i);
      _mm512_mask_storeu_ps(row + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + i), m));
    }
  }

  static void mad_row(float* row, const float* kv, float delta, int64_t d) {  // row += kv * delta, fused
    const __m512 m = _mm512_set1_ps(delta);
    for (int64_t i = 0; i < d; i += 16) {
      const __mmask16 k = tail_mask(d - i);
      _mm512_mask_storeu_ps(row + i, k, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, kv + i), m, _mm512_maskz_loadu_ps(k, row + i)));
    }
  }
};

// The same operations for head dims that are a multiple of 64 (up to 256: Clover's 128), with the
// row held in registers from the decay to the last dot product: one load and one store per value
// instead of four loads and two stores. Every lane sees the operations of scale_row, dot, mad_row
// and dot above in the same order, so the bits are the same.
template <int NV>  // 16-float vectors per row; NV % 4 == 0
inline float dot_regs(const __m512 (&x)[NV], const float* y) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int c = 0; c < NV; c += 4) {
    a0 = _mm512_fmadd_ps(x[c], _mm512_loadu_ps(y + 16 * c), a0);
    a1 = _mm512_fmadd_ps(x[c + 1], _mm512_loadu_ps(y + 16 * c + 16), a1);
    a2 = _mm512_fmadd_ps(x[c + 2], _mm512_loadu_ps(y + 16 * c + 32), a2);
    a3 = _mm512_fmadd_ps(x[c + 3], _mm512_loadu_ps(y + 16 * c + 48), a3);
  }
  return reduce(a0, a1, a2, a3);
}

template <int NV, bool Reverse>
void step_regs(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale, float* o) {
  constexpr int d = 16 * NV;
  const __m512 m = _mm512_set1_ps(decay);
  for (int j = 0; j < d; ++j) {
    float* row = S + j * d;
    __m512 r[NV];
    for (int c = 0; c < NV; ++c) r[c] = _mm512_loadu_ps(row + 16 * c);
    if constexpr (Reverse) o[j] += dot_regs<NV>(r, q) * scale;
    for (int c = 0; c < NV; ++c) r[c] = _mm512_mul_ps(r[c], m);
    const __m512 delta = _mm512_set1_ps((v[j] - dot_regs<NV>(r, k)) * beta);
    for (int c = 0; c < NV; ++c) r[c] = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16 * c), delta, r[c]);
    for (int c = 0; c < NV; ++c) _mm512_storeu_ps(row + 16 * c, r[c]);
    if constexpr (!Reverse) o[j] = dot_regs<NV>(r, q) * scale;
  }
}

template <bool Reverse>
bool step_in_registers(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                       int64_t d, float* o) {
  switch (d) {
    case 64: return step_regs<4, Reverse>(S, q, k, v, decay, beta, scale, o), true;
    case 128: return step_regs<8, Reverse>(S, q, k, v, decay, beta, scale, o), true;
    case 192: return step_regs<12, Reverse>(S, q, k, v, decay, beta, scale, o), true;
    case 256: return step_regs<16, Reverse>(S, q, k, v, decay, beta, scale, o), true;
    default: return false;
  }
}

}  // namespace

void gdn_step_avx512(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                     int64_t d, float* o) {
  if (!step_in_registers<false>(S, q, k, v, decay, beta, scale, d, o)) gdn_rows<Avx512Ops, false>(S, q, k, v, decay, beta, scale, d, o);
}

void gdn_step_reverse_avx512(float* R, const float* q, const float* k, const float* v, float decay, float beta,
                             float scale, int64_t d, float* o) {
  if (!step_in_registers<true>(R, q, k, v, decay, beta, scale, d, o)) gdn_rows<Avx512Ops, true>(R, q, k, v, decay, beta, scale, d, o);
}

}  // namespace clover::kernels::detail
