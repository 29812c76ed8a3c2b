// The CPU expert runner against a plain reference: for every routed row, down(silu(gate x) * up x)
// with the kernels' scalar twins (matmul_ref, swiglu_span_ref), for random experts of odd widths,
// uneven rows per expert (some empty) and a shared expert of another width, in F32 and Q8_0.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cpu/experts.h"
#include "kernels/convert.h"
#include "kernels/vecmath.h"

namespace clover::backend::cpu {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;
  kernels::MatRef ref;
  Matrix(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.f, 0.3f);
    const size_t stride = dtype_row_bytes(t, cols);
    bytes.resize(stride * rows);
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : row) x = nd(rng);
      kernels::quantize_row(t, row.data(), bytes.data() + r * stride, cols);
    }
    ref = kernels::MatRef{t, bytes.data(), rows, cols, stride};
  }
};

// down(swiglu(gate x, up x)) for one input row, with the scalar twins.
std::vector<float> reference(const ExpertWork& w, const float* x, int64_t E, int64_t ff) {
  kernels::ActRows a;
  a.convert(x, 1, E, E, kernels::activation_type(w.gate.type));
  std::vector<float> g(ff), u(ff), y(E);
  kernels::matmul_ref(w.gate, a, g.data(), ff, 0, ff);
  a.convert(x, 1, E, E, kernels::activation_type(w.up.type));
  kernels::matmul_ref(w.up, a, u.data(), ff, 0, ff);
  kernels::swiglu_span_ref(g.data(), u.data(), ff, 0, ff);
  a.convert(g.data(), 1, ff, ff, kernels::activation_type(w.down.type));
  kernels::matmul_ref(w.down, a, y.data(), E, 0, E);
  return y;
}

TEST(CpuExpertRunner, EveryRowEqualsThePlainReference) {
  for (DType t : {DType::F32, DType::Q8_0})
    for (int threads : {1, 2}) {
      std::mt19937 rng(5);
      const int64_t E = 96, ff = 160, ff_shared = 64;
      const int T = 7, n_exp = 5;
      ThreadPool pool(threads);
      std::vector<Matrix> mats;
      mats.reserve(3 * n_exp + 3);
      for (int e = 0; e < n_exp; ++e) {
        mats.emplace_back(t, ff, E, rng);
        mats.emplace_back(t, ff, E, rng);
        mats.emplace_back(t, E, ff, rng);
      }
      mats.emplace_back(t, ff_shared, E, rng);
      mats.emplace_back(t, ff_shared, E, rng);
      mats.emplace_back(t, E, ff_shared, rng);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x(T * E);
      for (auto& v : x) v = nd(rng);
      // Rows per expert: 3, 0, 1, 5, 2 (token lists with repeats across experts).
      const std::vector<std::vector<int32_t>> tokens = {{0, 2, 6}, {}, {4}, {0, 1, 3, 5, 6}, {2, 3}};
      std::vector<ExpertWork> routed;
      int32_t row = 0;
      for (int e = 0; e < n_exp; ++e) {
        if (tokens[e].empty()) continue;
        routed.push_back(ExpertWork{mats[3 * e].ref, mats[3 * e + 1].ref, mats[3 * e + 2].ref, tokens[e].data(),
                                    static_cast<int32_t>(tokens[e].size()), row});
        row += static_cast<int32_t>(tokens[e].size());
      }
      std::vector<int32_t> all(T);
      for (int i = 0; i < T; ++i) all[i] = i;
      const ExpertWork shared{mats[3 * n_exp].ref, mats[3 * n_exp + 1].ref, mats[3 * n_exp + 2].ref, all.data(), T, row};
      CpuExpertRunner runner(pool, row + T, E, ff);
      runner.run(x.data(), T, routed, row, ff, &shared, ff_shared);

      auto check = [&](const ExpertWork& w, int64_t width, const char* what) {
        for (int32_t i = 0; i < w.n; ++i) {
          const std::vector<float> want = reference(w, x.data() + w.tokens[i] * E, E, width);
          const float* got = runner.out(w.out_row + i);
          for (int64_t c = 0; c < E; ++c)
            ASSERT_NEAR(got[c], want[c], 1e-4f * (1.f + std::fabs(want[c])))
                << dtype_name(t) << " threads " << threads << " " << what << " row " << w.out_row + i << " col " << c;
        }
      };
      for (const ExpertWork& w : routed) check(w, ff, "routed");
      check(shared, ff_shared, "shared");
    }
}

}  // namespace
}  // namespace clover::backend::cpu
