// Every SIMD path against the scalar reference twin, and batch invariance (bitwise) of each path.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels {
namespace {

constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                            DType::Q5_K, DType::Q6_K, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS};
constexpr Isa kIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512};

// A weight matrix stored as `type`, rows `stride` bytes apart (a few bytes of padding between
// rows, so that kernels reading past a row end would be caught by the comparisons).
struct Weights {
  DType type;
  int64_t rows, cols;
  size_t stride;
  std::vector<uint8_t> data;
  std::vector<float> deq;  // dequantised copy, for magnitude bounds

  MatRef ref() const { return MatRef{type, data.data(), rows, cols, stride}; }
};

Weights make_weights(DType t, int64_t rows, int64_t cols, std::mt19937& rng, size_t pad = 0) {
  Weights w{t, rows, cols, dtype_row_bytes(t, cols) + pad, {}, {}};
  w.data.assign(w.stride * static_cast<size_t>(rows), 0xA5);
  w.deq.resize(static_cast<size_t>(rows * cols));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t o = 0; o < rows; ++o) {
    for (float& v : row) v = nd(rng);
    quantize_row(t, row.data(), w.data.data() + o * w.stride, cols);
    dequantize_row(t, w.data.data() + o * w.stride, w.deq.data() + o * cols, cols);
  }
  return w;
}

std::vector<float> random_acts(int64_t n, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = nd(rng);
  return x;
}

// Runs `fn` with the given ISA forced, restoring the best one afterwards.
template <class Fn>
void with_isa(Isa isa, Fn&& fn) {
  isa_force(isa);
  fn();
  isa_force(isa_best());
}

bool isa_available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(isa_best()); }

class MatmulPath : public ::testing::TestWithParam<std::tuple<Isa, DType>> {
 protected:
  void SetUp() override {
    if (!isa_available(isa())) GTEST_SKIP() << "CPU lacks " << isa_name(isa());
  }
  Isa isa() const { return std::get<0>(GetParam()); }
  DType type() const { return std::get<1>(GetParam()); }
};

TEST_P(MatmulPath, MatchesReferenceOnOddShapes) {
  std::mt19937 rng(1234 + static_cast<int>(type()));
  struct Shape { int64_t rows, cols, n; };
  std::vector<Shape> shapes = {{1, 32, 1}, {3, 64, 2}, {4, 96, 5}, {5, 128, 1}, {67, 4096, 3},
                               {13, 4064, 33}, {8, 160, 8}, {9, 224, 17}, {2, 2048, 32}};
  std::uniform_int_distribution<int> ur(1, 67), uc(1, 128), un(1, 33);
  for (int i = 0; i < 12; ++i) shapes.push_back({ur(rng), 32 * uc(rng), un(rng)});
  if (dtype_is_kquant(type())) {  // whole 256-value super-blocks; 8k rows: Q4_K / IQ4_XS block orders
    shapes = {{1, 256, 1}, {3, 512, 2}, {8, 768, 5}, {9, 256, 17}, {16, 2048, 4}, {40, 1280, 33}, {24, 4096, 3},
              {56, 512, 70}, {11, 256, 129}};  // more activation rows than one panel of the AVX-512 row kernels
    std::uniform_int_distribution<int> uk(1, 12);
    for (int i = 0; i < 8; ++i) shapes.push_back({ur(rng), 256 * uk(rng), un(rng)});
  }
  if (type() == DType::F32 || type() == DType::F16 || type() == DType::BF16) {
    shapes.push_back({7, 33, 3});  // float types: any number of columns
    shapes.push_back({5, 1, 2});
    shapes.push_back({6, 47, 9});
  }
  const DType at = activation_type(type());
  for (const Shape& s : shapes) {
    const Weights w = make_weights(type(), s.rows, s.cols, rng, 6);
    const std::vector<float> x = random_acts(s.n, s.cols, rng);
    ActRows acts;
    acts.convert(x.data(), s.n, s.cols, s.cols, at);
    std::vector<float> want(static_cast<size_t>(s.n * s.rows)), got(want.size(), NAN);
    matmul_ref(w.ref(), acts, want.data(), s.rows, 0, s.rows);
    with_isa(isa(), [&] { matmul(w.ref(), acts, got.data(), s.rows, 0, s.rows); });
    if (dtype_is_kquant(type())) {  // the paths give the twins' bits, in both orders
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << dtype_name(type()) << " " << isa_name(isa()) << " rows " << s.rows << " cols " << s.cols << " n " << s.n;
      const MatRef m = w.ref();
      for (int64_t r = 0; r < s.n; ++r)
        for (int64_t o = 0; o < s.rows; ++o)
          ASSERT_EQ(want[r * s.rows + o], detail::kquant_dot_ref(type(), w.data.data() + o * w.stride, acts.row(r), s.cols,
                                                                   s.rows, SumOrder::Gemm));
      std::vector<float> vd(got.size()), vd_ref(got.size());
      with_isa(isa(), [&] { matmul(m, acts, vd.data(), s.rows, 0, s.rows, SumOrder::VecDot); });
      for (int64_t r = 0; r < s.n; ++r)
        for (int64_t o = 0; o < s.rows; ++o)
          vd_ref[r * s.rows + o] = detail::kquant_dot_ref(type(), w.data.data() + o * w.stride, acts.row(r), s.cols, s.rows,
                                                          SumOrder::VecDot);
      ASSERT_EQ(0, std::memcmp(vd.data(), vd_ref.data(), vd.size() * sizeof(float))) << "VecDot order, rows " << s.rows;
    }

    // Tolerance: a few float roundings relative to the sum of |terms| (activations as converted).
    std::vector<float> xa(static_cast<size_t>(s.cols));
    for (int64_t r = 0; r < s.n; ++r) {
      dequantize_row(at, acts.row(r), xa.data(), s.cols);
      for (int64_t o = 0; o < s.rows; ++o) {
        double mag = 0;
        for (int64_t k = 0; k < s.cols; ++k) mag += std::fabs(double(w.deq[o * s.cols + k]) * xa[k]);
        const float y = got[r * s.rows + o], y0 = want[r * s.rows + o];
        ASSERT_NEAR(y, y0, 1e-5 * mag + 1e-30)
            << dtype_name(type()) << " " << isa_name(isa()) << " rows " << s.rows << " cols " << s.cols
            << " n " << s.n << " at r " << r << " o " << o;
      }
    }
  }
}

// The same output element must come out bit-identical whether computed alone, in a batch of any
// size, in any o-range of a thread, or through matmul_selected.
TEST_P(MatmulPath, BatchInvariantBitwise) {
  std::mt19937 rng(99 + static_cast<int>(type()));
  const DType at = activation_type(type());
  const bool kq = dtype_is_kquant(type());
  const std::vector<int64_t> col_list = kq ? std::vector<int64_t>{256, 768, 2048, 8192} : std::vector<int64_t>{32, 96, 416, 2048, 8192};
  for (int64_t cols : col_list) {  // 8192: several panels
    const int64_t rows = kq ? 40 : 37, n = 33;  // K-quants: 40 rows take Q4_K's repacked order
    const Weights w = make_weights(type(), rows, cols, rng);
    const std::vector<float> x = random_acts(n, cols, rng);
    ActRows all;
    all.convert(x.data(), n, cols, cols, at);

    std::vector<float> full(static_cast<size_t>(n * rows));
    with_isa(isa(), [&] { matmul(w.ref(), all, full.data(), rows, 0, rows); });

    with_isa(isa(), [&] {
      // Any batch size and offset: rows [r0, r0 + len) converted on their own.
      ActRows part;
      std::vector<float> y(static_cast<size_t>(n * rows));
      for (int64_t len : {1, 2, 3, 4, 5, 7, 8, 9, 16, 33}) {
        for (int64_t r0 = 0; r0 + len <= n; r0 += std::max<int64_t>(1, len / 2 + 3)) {
          part.convert(x.data() + r0 * cols, len, cols, cols, at);
          matmul(w.ref(), part, y.data(), rows, 0, rows);
          ASSERT_EQ(0, std::memcmp(y.data(), full.data() + r0 * rows, sizeof(float) * len * rows))
              << "batch len " << len << " at " << r0 << " cols " << cols;
        }
      }
      // Output-row ranges as a thread pool would hand them out.
      for (int64_t split : {1, 2, 3, 5, 6, 7}) {
        std::fill(y.begin(), y.end(), NAN);
        int64_t o = 0;
        while (o < rows) {
          const int64_t e = std::min(rows, o + split);
          matmul(w.ref(), all, y.data(), rows, o, e);
          o = e;
        }
        ASSERT_EQ(0, std::memcmp(y.data(), full.data(), sizeof(float) * y.size())) << "split " << split;
      }
      // matmul_selected: any subset, in any order, with repeats, and a wider ldy.
      std::vector<int32_t> sel = {5, 0, 32, 5, 17, 3, 3, 1, 30, 12};
      const int64_t ldy = rows + 3;
      std::vector<float> ys(sel.size() * ldy, NAN);
      for (size_t cut : {size_t{1}, size_t{3}, sel.size()}) {
        matmul_selected(w.ref(), all, sel.data(), static_cast<int64_t>(cut), ys.data(), ldy, 0, rows);
        for (size_t i = 0; i < cut; ++i) {
          ASSERT_EQ(0, std::memcmp(&ys[i * ldy], &full[sel[i] * rows], sizeof(float) * rows)) << "sel " << i;
        }
      }
      matmul_selected(w.ref(), all, sel.data(), static_cast<int64_t>(sel.size()), ys.data(), ldy, 11, 30);
      for (size_t i = 0; i < sel.size(); ++i) {
        ASSERT_EQ(0, std::memcmp(&ys[i * ldy + 11], &full[sel[i] * rows + 11], sizeof(float) * 19));
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(All, MatmulPath, ::testing::Combine(::testing::ValuesIn(kIsas), ::testing::ValuesIn(kTypes)),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

TEST(Matmul, ActivationTypes) {
  EXPECT_EQ(activation_type(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(activation_type(DType::Q8_0), DType::Q8_0);
  EXPECT_EQ(activation_type(DType::F16), DType::F16);
  EXPECT_EQ(activation_type(DType::BF16), DType::BF16);
  EXPECT_EQ(activation_type(DType::F32), DType::F32);
}

TEST(Matmul, ActRowsMatchRowQuantisers) {
  std::mt19937 rng(5);
  const int64_t n = 3, cols = 96, stride = 100;
  std::vector<float> x = random_acts(n, stride, rng);
  ActRows a;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    a.convert(x.data(), n, cols, stride, t);
    EXPECT_EQ(a.type(), t);
    EXPECT_EQ(a.rows(), n);
    EXPECT_EQ(a.cols(), cols);
    std::vector<uint8_t> want(dtype_row_bytes(t, cols));
    for (int64_t r = 0; r < n; ++r) {
      if (t == DType::Q8_0) {
        quantize_row_q8_0_activation(x.data() + r * stride, reinterpret_cast<BlockQ8_0*>(want.data()), cols);
      } else {
        quantize_row(t, x.data() + r * stride, want.data(), cols);
      }
      EXPECT_EQ(0, std::memcmp(a.row(r), want.data(), want.size())) << dtype_name(t) << " row " << r;
    }
  }
}

// ActRows must hold the same bytes whichever ISA converted them: ties, zero blocks and tiny
// blocks included.
TEST(Matmul, ActRowsIdenticalUnderEveryIsa) {
  std::mt19937 rng(8);
  const int64_t n = 5, cols = 32 * 11;
  std::vector<float> x = random_acts(n, cols, rng);
  for (int64_t b = 0; b < n * cols / 32; ++b) {
    float* v = x.data() + b * 32;
    if (b % 4 == 1) std::fill(v, v + 32, 0.0f);
    if (b % 4 == 2) for (int j = 0; j < 32; ++j) v[j] = std::round(v[j] * 30) + 0.5f * (j % 2);
    if (b % 4 == 3) for (int j = 0; j < 32; ++j) v[j] *= 1e-39f;  // subnormal: 127 / amax overflows
  }
  const size_t plain = static_cast<size_t>(n) * dtype_row_bytes(DType::Q8_0, cols);
  ActRows want;
  with_isa(Isa::Scalar, [&] { want.convert(x.data(), n, cols, cols, DType::Q8_0); });
  for (Isa isa : kIsas) {
    if (!isa_available(isa)) continue;
    ActRows got;
    with_isa(isa, [&] { got.convert(x.data(), n, cols, cols, DType::Q8_0); });
    EXPECT_EQ(0, std::memcmp(got.row(0), want.row(0), plain)) << isa_name(isa);
  }
}

// F16 / BF16 activations: the F16C and AVX2 conversions give the scalar bytes (ties, overflow,
// subnormals, NaN, a column tail).
TEST(Matmul, F16AndBf16ActRowsIdenticalUnderEveryIsa) {
  std::mt19937 rng(9);
  const int64_t n = 3, cols = 77;
  std::vector<float> x = random_acts(n, cols, rng);
  const float specials[] = {65520.0f, 0x3p-25f, 1.0f + 0x1p-11f, NAN, -INFINITY, std::bit_cast<float>(0x3f808000u),
                            std::bit_cast<float>(0x3f818000u), std::bit_cast<float>(0x7f7fffffu),
                            std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0x00010000u), -0.0f};
  for (size_t k = 0; k < std::size(specials); ++k) x[5 + 7 * k] = specials[k];
  for (DType t : {DType::F16, DType::BF16}) {
    ActRows want;
    with_isa(Isa::Scalar, [&] { want.convert(x.data(), n, cols, cols, t); });
    for (Isa isa : kIsas) {
      if (!isa_available(isa)) continue;
      ActRows got;
      with_isa(isa, [&] { got.convert(x.data(), n, cols, cols, t); });
      EXPECT_EQ(0, std::memcmp(got.row(0), want.row(0), n * cols * 2)) << dtype_name(t) << " " << isa_name(isa);
    }
  }
}

// A copied ActRows (its buffer at another address and alignment) gives the same results.
TEST(Matmul, CopiedActRowsGiveSameResults) {
  std::mt19937 rng(10);
  const int64_t rows = 9, cols = 320, n = 3;
  const Weights w = make_weights(DType::Q4_0, rows, cols, rng);
  std::vector<float> x = random_acts(n, cols, rng);
  ActRows a;
  a.convert(x.data(), n, cols, cols, DType::Q8_0);
  std::vector<float> y0(n * rows), y1(n * rows);
  matmul(w.ref(), a, y0.data(), rows, 0, rows);
  for (int k = 0; k < 8; ++k) {
    std::vector<std::unique_ptr<char[]>> shift;  // nudge the allocator to other addresses
    shift.emplace_back(new char[16 * (k + 1)]);
    const ActRows copy = a;
    matmul(w.ref(), copy, y1.data(), rows, 0, rows);
    ASSERT_EQ(0, std::memcmp(y0.data(), y1.data(), sizeof(float) * y0.size()));
  }
}

TEST(Matmul, WarmActRowsDoNotReallocate) {
  std::mt19937 rng(6);
  std::vector<float> x = random_acts(8, 256, rng);
  ActRows a;
  a.convert(x.data(), 8, 256, 256, DType::F16);  // the largest of the calls below warms it
  const void* p = a.row(0);
  a.convert(x.data(), 8, 256, 256, DType::Q8_0);
  EXPECT_EQ(a.row(0), p);
  a.convert(x.data(), 3, 256, 256, DType::Q8_0);
  EXPECT_EQ(a.row(0), p);
  a.convert(x.data(), 8, 256, 256, DType::F16);
  EXPECT_EQ(a.row(0), p);
}

TEST(Matmul, EmptyCallsAndExactSmallValues) {
  // Q8_0 x Q8_0 with small integers is exact: y = sum of products.
  const int64_t cols = 64;
  std::vector<float> w(2 * cols), x(cols);
  for (int64_t k = 0; k < cols; ++k) {
    w[k] = (k % 7) - 3.0f;
    w[cols + k] = 1.0f;
    x[k] = (k % 5) - 2.0f;
  }
  for (int64_t k : {int64_t{0}, int64_t{32}}) {  // scale 1 in every block: the values are the q
    x[k] = 127.0f;
    w[k] = 127.0f;
    w[cols + k] = -127.0f;
  }
  std::vector<uint8_t> wq(2 * dtype_row_bytes(DType::Q8_0, cols));
  quantize_row(DType::Q8_0, w.data(), wq.data(), cols);
  quantize_row(DType::Q8_0, w.data() + cols, wq.data() + wq.size() / 2, cols);
  MatRef m{DType::Q8_0, wq.data(), 2, cols, wq.size() / 2};
  ActRows a;
  a.convert(x.data(), 1, cols, cols, DType::Q8_0);
  for (Isa isa : kIsas) {
    if (!isa_available(isa)) continue;
    float y[2] = {NAN, NAN};
    with_isa(isa, [&] {
      matmul(m, a, y, 2, 1, 1);  // empty range: writes nothing
      EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
      matmul(m, a, y, 2, 0, 2);
    });
    double want0 = 0, want1 = 0;
    for (int64_t k = 0; k < cols; ++k) {
      want0 += double(w[k]) * x[k];
      want1 += double(w[cols + k]) * x[k];
    }
    EXPECT_EQ(y[0], want0) << isa_name(isa);
    EXPECT_EQ(y[1], want1) << isa_name(isa);
  }
}

TEST(Matmul, IsaForceClampsToCpu) {
  const Isa best = isa_best();
  isa_force(Isa::Avx512);
  EXPECT_EQ(isa_active(), best);
  isa_force(Isa::Scalar);
  EXPECT_EQ(isa_active(), Isa::Scalar);
  isa_force(best);
  EXPECT_EQ(isa_name(Isa::Avx2), "avx2");
}

}  // namespace
}  // namespace clover::kernels
