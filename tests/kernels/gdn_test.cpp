// Gated delta rule steps: the scalar twin against the formula in double precision, and every ISA
// path bit for bit against the twin (odd head sizes, several positions in a row, both directions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/gdn.h"
#include "kernels/matmul.h"

using namespace clover::kernels;

namespace {

struct Seq {
  int64_t d, T;
  std::vector<float> q, k, v, decay, beta, S0;
};

Seq random_seq(int64_t d, int64_t T, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  Seq s{d, T, {}, {}, {}, {}, {}, {}};
  auto fill = [&](std::vector<float>& x, int64_t n) {
    x.resize(n);
    for (float& e : x) e = nd(rng);
  };
  fill(s.q, d * T), fill(s.k, d * T), fill(s.v, d * T), fill(s.S0, d * d);
  for (int64_t t = 0; t < T; ++t) {  // q and k are L2-normalised in the model
    for (auto* x : {&s.q, &s.k}) {
      double n2 = 0;
      for (int64_t i = 0; i < d; ++i) n2 += double((*x)[t * d + i]) * (*x)[t * d + i];
      for (int64_t i = 0; i < d; ++i) (*x)[t * d + i] = float((*x)[t * d + i] / std::sqrt(n2));
    }
    s.decay.push_back(u(rng));
    s.beta.push_back(u(rng));
  }
  return s;
}

// The recurrence of gdn.h in double, position by position.
void formula(const Seq& s, bool reverse, std::vector<double>& S, std::vector<double>& o) {
  const int64_t d = s.d;
  const double scale = 1.0 / std::sqrt(double(d));
  S.assign(s.S0.begin(), s.S0.end());
  o.assign(d * s.T, 0.5);  // the reverse step adds into o
  for (int64_t n = 0; n < s.T; ++n) {
    const int64_t t = reverse ? s.T - 1 - n : n;
    const float *q = &s.q[t * d], *k = &s.k[t * d], *v = &s.v[t * d];
    for (int64_t j = 0; j < d; ++j) {
      double* row = &S[j * d];
      if (reverse) {
        double rq = 0;
        for (int64_t i = 0; i < d; ++i) rq += row[i] * q[i];
        o[t * d + j] += rq * scale;
      }
      double sk = 0;
      for (int64_t i = 0; i < d; ++i) sk += (row[i] *= s.decay[t]) * k[i];
      const double delta = (v[j] - sk) * s.beta[t];
      double sq = 0;
      for (int64_t i = 0; i < d; ++i) sq += (row[i] += k[i] * delta) * q[i];
      if (!reverse) o[t * d + j] = sq * scale;
    }
  }
}

void run(const Seq& s, bool reverse, bool ref, std::vector<float>& S, std::vector<float>& o) {
  const int64_t d = s.d;
  const float scale = 1.0f / std::sqrt(float(d));
  S = s.S0;
  o.assign(d * s.T, 0.5f);
  for (int64_t n = 0; n < s.T; ++n) {
    const int64_t t = reverse ? s.T - 1 - n : n;
    auto fn = reverse ? (ref ? gdn_step_reverse_ref : gdn_step_reverse) : (ref ? gdn_step_ref : gdn_step);
    fn(S.data(), &s.q[t * d], &s.k[t * d], &s.v[t * d], s.decay[t], s.beta[t], scale, d, &o[t * d]);
  }
}

constexpr int64_t kDims[] = {1, 3, 15, 16, 17, 33, 63, 64, 65, 100, 128, 130, 192, 200, 256};  // 64, 128, 192, 256: AVX-512 in registers

}  // namespace

TEST(GdnStep, ReferenceMatchesFormula) {
  std::mt19937 rng(7);
  for (bool reverse : {false, true})
    for (int64_t d : kDims) {
      const Seq s = random_seq(d, 6, rng);
      std::vector<double> S, o;
      std::vector<float> Sf, of;
      formula(s, reverse, S, o);
      run(s, reverse, true, Sf, of);
      for (size_t i = 0; i < S.size(); ++i) ASSERT_NEAR(Sf[i], S[i], 1e-4 * (1 + std::fabs(S[i]))) << "d " << d << " S " << i;
      for (size_t i = 0; i < o.size(); ++i) ASSERT_NEAR(of[i], o[i], 1e-4 * (1 + std::fabs(o[i]))) << "d " << d << " o " << i;
    }
}

TEST(GdnStep, EveryIsaBitwiseEqualToReference) {
  std::mt19937 rng(11);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
    isa_force(isa);
    for (bool reverse : {false, true})
      for (int64_t d : kDims)
        for (int64_t T : {1, 2, 9}) {
          const Seq s = random_seq(d, T, rng);
          std::vector<float> S1, o1, S2, o2;
          run(s, reverse, true, S1, o1);
          run(s, reverse, false, S2, o2);
          ASSERT_EQ(0, std::memcmp(S1.data(), S2.data(), S1.size() * sizeof(float)))
              << isa_name(isa) << " reverse " << reverse << " d " << d << " T " << T;
          ASSERT_EQ(0, std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float)))
              << isa_name(isa) << " reverse " << reverse << " d " << d << " T " << T;
        }
  }
  isa_force(isa_best());
}
