// Bit-for-bit comparison with ggml itself: the prebuilt ggml v0.5.0 libraries that node-llama-cpp
// installs (npm test tooling, see tools/oracle). Skipped when they are not installed.
//
// Checked: fp16 / bf16 conversion, the file quantisers (quantize_row_q4_0_ref / q8_0_ref), the
// x86 activation quantiser of ggml-cpu (quantize_row_q8_0), the Q4_0 / Q8_0 dot products, the
// element-wise math (silu, swiglu, softmax terms: kernels/vecmath.h), the row dot products of
// SumOrder::VecDot (F32 / F16 / BF16), and the gated delta rule step's dot products.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/gdn.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/vecmath.h"
#include "ggml_lib.h"

namespace clover::kernels {
namespace {

struct GgmlBf16 { uint16_t bits; };

struct Ggml {
  void* base = nullptr;
  void* cpu = nullptr;
  uint16_t (*fp32_to_fp16)(float) = nullptr;
  GgmlBf16 (*fp32_to_bf16)(float) = nullptr;
  void (*q4_0_ref)(const float*, void*, int64_t) = nullptr;
  void (*q8_0_ref)(const float*, void*, int64_t) = nullptr;
  void (*q8_0_act)(const float*, void*, int64_t) = nullptr;
  void (*dot_q4_0)(int, float*, size_t, const void*, size_t, const void*, size_t, int) = nullptr;
  void (*dot_q8_0)(int, float*, size_t, const void*, size_t, const void*, size_t, int) = nullptr;
  void (*dot_f32)(int, float*, size_t, const float*, size_t, const float*, size_t, int) = nullptr;
  void (*dot_f16)(int, float*, size_t, const uint16_t*, size_t, const uint16_t*, size_t, int) = nullptr;
  void (*dot_bf16)(int, float*, size_t, const uint16_t*, size_t, const uint16_t*, size_t, int) = nullptr;
  void (*silu)(int, float*, const float*) = nullptr;
  void (*swiglu)(int, float*, const float*, const float*) = nullptr;
  double (*soft_max)(int, float*, const float*, float) = nullptr;
  std::string why;

  Ggml() {
    const testing::GgmlLibs& libs = testing::ggml_libs();
    base = libs.base, cpu = libs.cpu, why = libs.why;
    if (!why.empty()) return;
    fp32_to_fp16 = reinterpret_cast<decltype(fp32_to_fp16)>(dlsym(base, "ggml_fp32_to_fp16"));
    fp32_to_bf16 = reinterpret_cast<decltype(fp32_to_bf16)>(dlsym(base, "ggml_fp32_to_bf16"));
    q4_0_ref = reinterpret_cast<decltype(q4_0_ref)>(dlsym(base, "quantize_row_q4_0_ref"));
    q8_0_ref = reinterpret_cast<decltype(q8_0_ref)>(dlsym(base, "quantize_row_q8_0_ref"));
    q8_0_act = reinterpret_cast<decltype(q8_0_act)>(dlsym(cpu, "quantize_row_q8_0"));
    dot_q4_0 = reinterpret_cast<decltype(dot_q4_0)>(dlsym(cpu, "ggml_vec_dot_q4_0_q8_0"));
    dot_q8_0 = reinterpret_cast<decltype(dot_q8_0)>(dlsym(cpu, "ggml_vec_dot_q8_0_q8_0"));
    dot_f32 = reinterpret_cast<decltype(dot_f32)>(dlsym(cpu, "ggml_vec_dot_f32"));
    dot_f16 = reinterpret_cast<decltype(dot_f16)>(dlsym(cpu, "ggml_vec_dot_f16"));
    dot_bf16 = reinterpret_cast<decltype(dot_bf16)>(dlsym(cpu, "ggml_vec_dot_bf16"));
    silu = reinterpret_cast<decltype(silu)>(dlsym(cpu, "ggml_vec_silu_f32"));
    swiglu = reinterpret_cast<decltype(swiglu)>(dlsym(cpu, "ggml_vec_swiglu_f32"));
    soft_max = reinterpret_cast<decltype(soft_max)>(dlsym(cpu, "ggml_vec_soft_max_f32"));
    if (!fp32_to_fp16 || !fp32_to_bf16 || !q4_0_ref || !q8_0_ref || !q8_0_act || !dot_q4_0 || !dot_q8_0 || !dot_f32 ||
        !dot_f16 || !dot_bf16 || !silu || !swiglu || !soft_max) {
      why = "ggml symbols missing";
    }
  }
  bool ok() const { return why.empty(); }
};

const Ggml& ggml() {
  static Ggml g;
  return g;
}

#define REQUIRE_GGML() \
  if (!ggml().ok()) GTEST_SKIP() << ggml().why

// Values that exercise every path: normal data, exact ties, all-zero and tiny blocks, and
// blocks whose largest magnitude is negative.
std::vector<float> tricky_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    float* v = x.data() + b * 32;
    const int kind = static_cast<int>(b % 6);
    for (int j = 0; j < 32; ++j) v[j] = nd(rng);
    if (kind == 1) {
      for (int j = 0; j < 32; ++j) v[j] = std::round(v[j] * 40.0f) + (j % 2 ? 0.5f : 0.0f);  // .5 ties
      v[0] = 127.0f;
    } else if (kind == 2) {
      for (int j = 0; j < 32; ++j) v[j] = 0.0f;
    } else if (kind == 3) {
      for (int j = 0; j < 32; ++j) v[j] *= 1e-6f;
    } else if (kind == 4) {
      v[7] = -9.0f;  // negative largest magnitude
    }
  }
  return x;
}

// `rows` x `cols` normal random weights stored as type t, and one activation row per x row.
struct TestMatrix {
  DType type;
  int64_t rows, cols;
  size_t rb;
  std::vector<uint8_t> w;
  MatRef ref() const { return MatRef{type, w.data(), rows, cols, rb}; }
  const void* row(int64_t o) const { return w.data() + o * rb; }
};

TestMatrix random_matrix(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> wf(static_cast<size_t>(rows * cols));
  for (float& v : wf) v = nd(rng);
  TestMatrix m{t, rows, cols, dtype_row_bytes(t, cols), {}};
  m.w.resize(m.rb * rows);
  for (int64_t o = 0; o < rows; ++o) quantize_row(t, wf.data() + o * cols, m.w.data() + o * m.rb, cols);
  return m;
}

ActRows random_acts(DType t, int64_t n, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = nd(rng);
  ActRows a;
  a.convert(x.data(), n, cols, cols, t);
  return a;
}

TEST(GgmlOracle, Fp16AndBf16) {
  REQUIRE_GGML();
  std::mt19937 rng(11);
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), ggml().fp32_to_fp16(f)) << f;
    ASSERT_EQ(fp32_to_bf16(f), ggml().fp32_to_bf16(f).bits) << f;
  }
}

TEST(GgmlOracle, FileQuantisersAreBitIdentical) {
  REQUIRE_GGML();
  const int64_t n = 32 * 600;
  const std::vector<float> x = tricky_values(n, 1);
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    std::vector<uint8_t> ours(dtype_row_bytes(t, n)), theirs(ours.size());
    quantize_row(t, x.data(), ours.data(), n);
    (t == DType::Q4_0 ? ggml().q4_0_ref : ggml().q8_0_ref)(x.data(), theirs.data(), n);
    EXPECT_EQ(ours, theirs) << dtype_name(t);
  }
}

TEST(GgmlOracle, ActivationQuantiserIsBitIdentical) {
  REQUIRE_GGML();
  const int64_t n = 32 * 600;
  const std::vector<float> x = tricky_values(n, 2);
  std::vector<BlockQ8_0> ours(n / 32), theirs(n / 32);
  quantize_row_q8_0_activation(x.data(), ours.data(), n);
  ggml().q8_0_act(x.data(), theirs.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    ASSERT_EQ(ours[b].d, theirs[b].d) << "block " << b;
    for (int j = 0; j < 32; ++j) ASSERT_EQ(ours[b].qs[j], theirs[b].qs[j]) << "block " << b << " value " << j;
  }
  // And ActRows produces the same rows.
  ActRows a;
  a.convert(x.data(), 1, n, n, DType::Q8_0);
  EXPECT_EQ(0, std::memcmp(a.row(0), theirs.data(), theirs.size() * sizeof(BlockQ8_0)));
}

TEST(GgmlOracle, QuantisedDotsMatchWithinFloatOrder) {
  REQUIRE_GGML();
  std::mt19937 rng(3);
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const int64_t rows = 9, cols = 2048 + 96;  // 9 rows: llama.cpp does not repack these Q4_0 rows
    const TestMatrix m = random_matrix(t, rows, cols, rng);
    const ActRows a = random_acts(DType::Q8_0, 1, cols, rng);
    const auto* ar = static_cast<const BlockQ8_0*>(a.row(0));
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
      isa_force(isa);
      std::vector<float> y(static_cast<size_t>(rows));
      matmul(m.ref(), a, y.data(), rows, 0, rows);
      isa_force(isa_best());
      for (int64_t o = 0; o < rows; ++o) {
        float want = 0;
        (t == DType::Q4_0 ? ggml().dot_q4_0 : ggml().dot_q8_0)(static_cast<int>(cols), &want, 0, m.row(o), 0, ar, 0, 1);
        // The scalar twin of llama.cpp's order gives its bits on any CPU.
        const float twin = t == DType::Q4_0 ? detail::q4_0_dot_lanes8_ref(static_cast<const BlockQ4_0*>(m.row(o)), ar, cols / 32)
                                            : detail::q8_0_dot_lanes8_ref(static_cast<const BlockQ8_0*>(m.row(o)), ar, cols / 32);
        EXPECT_EQ(twin, want) << dtype_name(t) << " twin row " << o;
        if (isa == Isa::Avx512)  // ggml's own order (matmul_internal.h)
          EXPECT_EQ(y[o], want) << dtype_name(t) << " avx512 row " << o;
        else
          EXPECT_NEAR(y[o], want, 2e-5f * (1.0f + std::fabs(want)))
              << dtype_name(t) << " " << isa_name(isa) << " row " << o;
      }
    }
  }
}

// Q4_0 matrices with a multiple of 8 rows follow llama.cpp's repacked order (one exact block sum
// per output): the AVX-512 and AVX2 kernels give the scalar twin's bits, and the twin stays within
// float order of ggml's plain vec_dot (the model oracle test checks the repacked order against
// llama.cpp). Activation rows of extreme bytes (+-127 everywhere) bound the AVX2 kernel's int16 sums.
TEST(GgmlOracle, Q4_0BlockOrderMatchesItsTwin) {
  REQUIRE_GGML();
  if (isa_best() == Isa::Scalar) GTEST_SKIP() << "the block order's SIMD paths are AVX2 and AVX-512";
  std::mt19937 rng(4);
  const int64_t rows = 40, cols = 2048 + 96, n = 6;
  const TestMatrix m = random_matrix(DType::Q4_0, rows, cols, rng);
  std::vector<float> x(static_cast<size_t>(n * cols));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  for (int64_t k = 0; k < cols; ++k) x[4 * cols + k] = 1.0f, x[5 * cols + k] = k % 2 ? -3.0f : 3.0f;
  ActRows a;
  a.convert(x.data(), n, cols, cols, DType::Q8_0);
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
    isa_force(isa);
    std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, rows}, {3, 21}, {24, 37}}) matmul(m.ref(), a, y.data(), rows, b, e);
    isa_force(isa_best());
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < rows; ++o) {
        const auto* wr = static_cast<const BlockQ4_0*>(m.row(o));
        const auto* ar = static_cast<const BlockQ8_0*>(a.row(r));
        EXPECT_EQ(y[r * rows + o], detail::q4_0_dot_blocks_ref(wr, ar, cols / 32))
            << isa_name(isa) << " row " << o << " act " << r;
        float want = 0;
        ggml().dot_q4_0(static_cast<int>(cols), &want, 0, wr, 0, ar, 0, 1);
        EXPECT_NEAR(y[r * rows + o], want, 2e-5f * (1.0f + std::fabs(want)));
      }
  }
}

// Values for the element-wise math: ordinary ones, large and tiny magnitudes (exp over- and
// underflow, the polynomial's range limits), zeros.
std::vector<float> activation_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (rng() % 16) {
      case 0: x[i] = 0.0f; break;
      case 1: x[i] = (rng() % 2 ? 1.0f : -1.0f) * static_cast<float>(80 + rng() % 60); break;
      case 2: x[i] = nd(rng) * 1e-8f; break;
      default: x[i] = nd(rng);
    }
  }
  return x;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}

TEST(GgmlOracle, SiluSwigluAndSoftmaxTermsAreBitIdentical) {
  REQUIRE_GGML();
  // The prebuilt library is the variant for this CPU: only its AVX-512 build sums in the orders
  // the engine follows (its AVX2 build takes 8-lane chunks); the engine's own results are the same
  // on every ISA (vecmath_test, gdn_test).
  if (isa_best() != Isa::Avx512) GTEST_SKIP() << "ggml's prebuilt library for this CPU is not its AVX-512 build";
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
    isa_force(isa);
    for (int n : {1, 7, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 256, 1000}) {
      const std::vector<float> x = activation_values(n, 100 + n), g = activation_values(n, 200 + n);
      std::vector<float> ours(n), theirs(n);
      silu_row(ours.data(), x.data(), n);
      ggml().silu(n, theirs.data(), x.data());
      EXPECT_TRUE(same_bits(ours, theirs)) << "silu n " << n << " " << isa_name(isa);
      ours = x;
      swiglu_span(ours.data(), g.data(), n, 0, n);
      ggml().swiglu(n, theirs.data(), x.data(), g.data());
      EXPECT_TRUE(same_bits(ours, theirs)) << "swiglu n " << n << " " << isa_name(isa);
      const float mx = *std::max_element(x.begin(), x.end());
      const double s_ours = softmax_exp_row(ours.data(), x.data(), n, mx);
      const double s_theirs = ggml().soft_max(n, theirs.data(), x.data(), mx);
      EXPECT_TRUE(same_bits(ours, theirs)) << "softmax terms n " << n << " " << isa_name(isa);
      EXPECT_EQ(s_ours, s_theirs) << "softmax sum n " << n << " " << isa_name(isa);
    }
  }
  isa_force(isa_best());
}

TEST(GgmlOracle, VecDotOrderIsBitIdentical) {
  REQUIRE_GGML();
  if (isa_best() != Isa::Avx512) GTEST_SKIP() << "SumOrder::VecDot is followed by the AVX-512 path only";
  std::mt19937 rng(5);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t cols : {8, 32, 40, 63, 64, 100, 128, 200, 2048 + 96}) {
      const int64_t rows = 5;
      const TestMatrix m = random_matrix(t, rows, cols, rng);
      const ActRows a = random_acts(activation_type(t), 1, cols, rng);
      std::vector<float> y(static_cast<size_t>(rows));
      matmul(m.ref(), a, y.data(), rows, 0, rows, SumOrder::VecDot);
      for (int64_t o = 0; o < rows; ++o) {
        float want = 0;
        if (t == DType::F32)
          ggml().dot_f32(static_cast<int>(cols), &want, 0, static_cast<const float*>(m.row(o)), 0,
                         static_cast<const float*>(a.row(0)), 0, 1);
        else
          (t == DType::F16 ? ggml().dot_f16 : ggml().dot_bf16)(static_cast<int>(cols), &want, 0,
                                                               static_cast<const uint16_t*>(m.row(o)), 0,
                                                               static_cast<const uint16_t*>(a.row(0)), 0, 1);
        EXPECT_EQ(y[o], want) << dtype_name(t) << " cols " << cols << " row " << o;
      }
    }
  }
}

// The gated delta rule's dot products are ggml_vec_dot_f32's (including its tail of groups of 8
// and fused multiply-adds), its update ggml_vec_mad_f32's fused multiply-add: one step written
// with ggml's own dot gives gdn_step's bits.
TEST(GgmlOracle, GdnStepUsesGgmlDotProducts) {
  REQUIRE_GGML();
  // The prebuilt library is the variant for this CPU: only its AVX-512 build sums in the orders
  // the engine follows (its AVX2 build takes 8-lane chunks); the engine's own results are the same
  // on every ISA (vecmath_test, gdn_test).
  if (isa_best() != Isa::Avx512) GTEST_SKIP() << "ggml's prebuilt library for this CPU is not its AVX-512 build";
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t d : {8, 32, 40, 64, 96, 128}) {
    std::vector<float> S(static_cast<size_t>(d * d)), q(d), k(d), v(d), o(d), S2, o2(d);
    for (float& e : S) e = nd(rng);
    for (auto* vec : {&q, &k, &v})
      for (float& e : *vec) e = nd(rng) * 0.2f;
    const float decay = 0.9f, beta = 0.4f, scale = 1.0f / std::sqrt(static_cast<float>(d));
    S2 = S;
    gdn_step(S.data(), q.data(), k.data(), v.data(), decay, beta, scale, d, o.data());
    for (int64_t j = 0; j < d; ++j) {
      float* row = S2.data() + j * d;
      for (int64_t i = 0; i < d; ++i) row[i] *= decay;
      float sk = 0;
      ggml().dot_f32(static_cast<int>(d), &sk, 0, row, 0, k.data(), 0, 1);
      const float delta = (v[j] - sk) * beta;
      for (int64_t i = 0; i < d; ++i) row[i] = std::fma(k[i], delta, row[i]);
      float sq = 0;
      ggml().dot_f32(static_cast<int>(d), &sq, 0, row, 0, q.data(), 0, 1);
      o2[j] = sq * scale;
    }
    EXPECT_TRUE(same_bits(o, o2)) << "output, d " << d;
    EXPECT_TRUE(same_bits(S, S2)) << "state, d " << d;
  }
}

}  // namespace
}  // namespace clover::kernels
