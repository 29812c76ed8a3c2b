// AVX-512 value pass of the exact attention (attention_exact_internal.h); the bits equal the twins'.
#include <immintrin.h>

#include <algorithm>

#include "kernels/attention_exact_internal.h"

namespace clover::kernels::detail {

void exact_values_avx512(const float* p, const KvHeadRef& v, int64_t n, int hd, float* lanes, float* o) {
  std::fill(lanes, lanes + 16 * hd, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const auto* vr = reinterpret_cast<const float*>(v.data + j * v.row_stride);
    float* a = lanes + (j & 15) * hd;
    const __m512 pj = _mm512_set1_ps(p[j]);
    for (int d0 = 0; d0 < hd; d0 += 16)
      _mm512_storeu_ps(a + d0, _mm512_fmadd_ps(_mm512_loadu_ps(vr + d0), pj, _mm512_loadu_ps(a + d0)));
  }
  // The 16-lane tree (l + 8, + 4, then (0 + 2) + (1 + 3)) for 16 dims at a time.
  for (int d0 = 0; d0 < hd; d0 += 16) {
    __m512 h[8];
    for (int l = 0; l < 8; ++l)
      h[l] = _mm512_add_ps(_mm512_loadu_ps(lanes + l * hd + d0), _mm512_loadu_ps(lanes + (l + 8) * hd + d0));
    for (int l = 0; l < 4; ++l) h[l] = _mm512_add_ps(h[l], h[l + 4]);
    _mm512_storeu_ps(o + d0, _mm512_add_ps(_mm512_add_ps(h[0], h[2]), _mm512_add_ps(h[1], h[3])));
  }
}

}  // namespace clover::kernels::detail
