// Gated delta rule steps: the scalar twin and run-time choice of the AVX-512 / AVX2 paths
// (gdn_avx512.cpp, gdn_avx2.cpp).
#include "kernels/gdn.h"

#include <cmath>

#include "kernels/gdn_internal.h"
#include "kernels/matmul.h"

namespace clover::kernels {

namespace {
constexpr int kLanes = 16;
constexpr int64_t kStep = 64;  // ggml's GGML_F32_STEP for AVX-512: 4 accumulators of 16 lanes

// ggml_vec_dot_f32's order (gdn.h).
float dot(const float* x, const float* y, int64_t n) {
  const int64_t np = n / kStep * kStep;
  float acc[4][kLanes] = {};
  for (int64_t i = 0; i < np; i += kStep)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < kLanes; ++l) acc[j][l] = std::fma(x[i + kLanes * j + l], y[i + kLanes * j + l], acc[j][l]);
  float b[kLanes];
  for (int l = 0; l < kLanes; ++l) b[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  float a8[8], a4[4], a2[2];
  for (int i = 0; i < 8; ++i) a8[i] = b[i] + b[i + 8];
  for (int i = 0; i < 4; ++i) a4[i] = a8[i] + a8[i + 4];
  for (int i = 0; i < 2; ++i) a2[i] = a4[i] + a4[i + 2];
  float s = a2[0] + a2[1];
  return detail::dot_tail(x, y, np, n, s);
}

// Plain loops: the decay a product, the update one fused multiply-add per element.
struct RefOps {
  static float dot(const float* x, const float* y, int64_t n) { return kernels::dot(x, y, n); }
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
