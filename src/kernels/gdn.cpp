// Gated delta rule steps: the scalar twin and run-time choice of the AVX-512 / AVX2 paths
// (gdn_avx512.cpp, gdn_avx2.cpp).
#include "kernels/gdn.h"

#include <cmath>

#include "kernels/gdn_internal.h"
#include "kernels/matmul.h"

namespace clover::kernels {

namespace {

// Plain loops: the decay a product, the update one fused multiply-add per element.
struct RefOps {
  static float dot(const float* x, const float* y, int64_t n) { return detail::vec_dot_f32_ref(x, y, n); }
  static void scale_row(float* row, float decay, int64_t d) {
    for (int64_t i = 0; i < d; ++i) row[i] = row[i] * decay;
  }
  static void mad_row(float* row, const float* kv, float delta, int64_t d) {
    for (int64_t i = 0; i < d; ++i) row[i] = std::fma(kv[i], delta, row[i]);
  }
};
}  // namespace

void gdn_step_ref(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                  int64_t d, float* o) {
  detail::gdn_rows<RefOps, false>(S, q, k, v, decay, beta, scale, d, o);
}

void gdn_step_reverse_ref(float* R, const float* q, const float* k, const float* v, float decay, float beta,
                          float scale, int64_t d, float* o) {
  detail::gdn_rows<RefOps, true>(R, q, k, v, decay, beta, scale, d, o);
}

void gdn_step(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale, int64_t d,
              float* o) {
  switch (isa_active()) {
    case Isa::Avx512: detail::gdn_step_avx512(S, q, k, v, decay, beta, scale, d, o); break;
    case Isa::Avx2: detail::gdn_step_avx2(S, q, k, v, decay, beta, scale, d, o); break;
    case Isa::Scalar: gdn_step_ref(S, q, k, v, decay, beta, scale, d, o); break;
  }
}

void gdn_step_reverse(float* R, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                      int64_t d, float* o) {
  switch (isa_active()) {
    case Isa::Avx512: detail::gdn_step_reverse_avx512(R, q, k, v, decay, beta, scale, d, o); break;
    case Isa::Avx2: detail::gdn_step_reverse_avx2(R, q, k, v, decay, beta, scale, d, o); break;
    case Isa::Scalar: gdn_step_reverse_ref(R, q, k, v, decay, beta, scale, d, o); break;
  }
}

}  // namespace clover::kernels
