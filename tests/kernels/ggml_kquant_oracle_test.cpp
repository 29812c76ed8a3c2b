// K-quants against the prebuilt ggml (ggml_lib.h): the Q8_K activation quantiser, the
// dequantisers, and the dot products of the twins and of every SIMD path, on weights from this
// project's quantiser and from ggml's own (quantize_row_qN_K_ref), and IQ4_XS through ggml's own
// matrix product. Skipped when ggml is missing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "ggml_lib.h"
#include "kernels/convert.h"
#include "kernels/kquant.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace clover::kernels {
namespace {

using RowFn = void (*)(const float*, void*, int64_t);
using DequantFn = void (*)(const void*, float*, int64_t);
using DotFn = void (*)(int, float*, size_t, const void*, size_t, const void*, size_t, int);

struct KGgml {
  RowFn q8_k_act = nullptr;
  std::string why;
  struct PerType {
    DType t;
    RowFn quant = nullptr;
    DequantFn dequant = nullptr;
    DotFn dot = nullptr;
  };
  std::vector<PerType> types;

  KGgml() {
    const auto& g = testing::ggml_libs();
    why = g.why;
    if (!why.empty()) return;
    q8_k_act = g.sym<RowFn>(g.cpu, "quantize_row_q8_K");
    const struct { DType t; const char* q; const char* dq; const char* dot; } names[] = {
        {DType::Q4_K, "quantize_row_q4_K_ref", "dequantize_row_q4_K", "ggml_vec_dot_q4_K_q8_K"},
        {DType::Q2_K, "quantize_row_q2_K_ref", "dequantize_row_q2_K", "ggml_vec_dot_q2_K_q8_K"},
        {DType::Q3_K, "quantize_row_q3_K_ref", "dequantize_row_q3_K", "ggml_vec_dot_q3_K_q8_K"},
        {DType::Q5_K, "quantize_row_q5_K_ref", "dequantize_row_q5_K", "ggml_vec_dot_q5_K_q8_K"},
        {DType::Q6_K, "quantize_row_q6_K_ref", "dequantize_row_q6_K", "ggml_vec_dot_q6_K_q8_K"},
        {DType::IQ4_XS, "quantize_row_iq4_xs_ref", "dequantize_row_iq4_xs", "ggml_vec_dot_iq4_xs_q8_K"},
    };
    for (const auto& n : names) {
      PerType p{n.t, g.sym<RowFn>(g.base, n.q), g.sym<DequantFn>(g.base, n.dq), g.sym<DotFn>(g.cpu, n.dot)};
      if (!p.quant || !p.dequant || !p.dot) why = std::string("ggml symbols missing for ") + std::string(dtype_name(n.t));
      types.push_back(p);
    }
    if (!q8_k_act) why = "quantize_row_q8_K missing";
  }
  bool ok() const { return why.empty(); }
};

const KGgml& kg() {
  static KGgml g;
  return g;
}

#define REQUIRE_KGGML() \
  if (!kg().ok()) GTEST_SKIP() << kg().why

std::vector<float> normal_values(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(rng);
  // Some super-blocks of all zeros, of tiny values, of one sign only: the edge cases of the scales.
  for (int64_t b = 0; b < n / 256; ++b) {
    float* v = x.data() + b * 256;
    if (b % 7 == 3) std::fill(v, v + 256, 0.0f);
    if (b % 7 == 5) for (int j = 0; j < 256; ++j) v[j] *= 1e-6f;
    if (b % 7 == 6) for (int j = 0; j < 256; ++j) v[j] = std::fabs(v[j]);
  }
  return x;
}

TEST(GgmlKQuant, Q8KActivationQuantiserIsBitIdentical) {
  REQUIRE_KGGML();
  const int64_t n = 256 * 40;
  const std::vector<float> x = normal_values(n, 1);
  std::vector<BlockQ8_K> ours(n / 256), theirs(n / 256);
  quantize_row_q8_k_activation(x.data(), ours.data(), n);
  kg().q8_k_act(x.data(), theirs.data(), n);
  EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data(), ours.size() * sizeof(BlockQ8_K)));
  ActRows a;
  a.convert(x.data(), 1, n, n, DType::Q8_K);
  EXPECT_EQ(0, std::memcmp(a.row(0), theirs.data(), theirs.size() * sizeof(BlockQ8_K)));
}

TEST(GgmlKQuant, DequantisersAreBitIdentical) {
  REQUIRE_KGGML();
  const int64_t n = 256 * 21;
  const std::vector<float> x = normal_values(n, 2);
  for (const auto& p : kg().types) {
    for (bool ggml_quantised : {false, true}) {
      std::vector<uint8_t> q(dtype_row_bytes(p.t, n));
      if (ggml_quantised) p.quant(x.data(), q.data(), n);
      else quantize_row(p.t, x.data(), q.data(), n);
      std::vector<float> ours(n), theirs(n);
      dequantize_row(p.t, q.data(), ours.data(), n);
      p.dequant(q.data(), theirs.data(), n);
      EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data(), n * sizeof(float)))
          << dtype_name(p.t) << (ggml_quantised ? " (ggml's quantiser)" : " (ours)");
    }
  }
}

// Our quantiser is not ggml's, but it must be about as good: the reconstruction error of each
// type stays within 10 % of ggml's reference quantiser on normal data (5 % for Q2_K and Q3_K).
TEST(GgmlKQuant, OwnQuantiserIsAsGoodAsGgmls) {
  REQUIRE_KGGML();
  const int64_t n = 256 * 64;
  std::vector<float> x(n);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  for (const auto& p : kg().types) {
    double err[2] = {};
    for (int who = 0; who < 2; ++who) {
      std::vector<uint8_t> q(dtype_row_bytes(p.t, n));
      if (who) p.quant(x.data(), q.data(), n);
      else quantize_row(p.t, x.data(), q.data(), n);
      std::vector<float> y(n);
      dequantize_row(p.t, q.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) err[who] += double(y[i] - x[i]) * (y[i] - x[i]);
    }
    const double bound = p.t == DType::Q2_K || p.t == DType::Q3_K ? 1.05 : 1.10;
    std::printf("%s: squared error ours %.6g, ggml %.6g (ratio %.4f)\n", std::string(dtype_name(p.t)).c_str(), err[0], err[1],
                err[0] / err[1]);
    EXPECT_LT(err[0], bound * err[1]) << dtype_name(p.t) << ": ours " << err[0] << ", ggml " << err[1];
  }
}

// The lanes twins give ggml_vec_dot_qN_K_q8_K's bits; so does every matmul path where llama.cpp
// uses that order (Q5_K, Q6_K always; Q4_K and IQ4_XS with a row count that is not a multiple of 8).
TEST(GgmlKQuant, VecDotTwinsAndPathsAreBitIdentical) {
  REQUIRE_KGGML();
  const int64_t rows = 9, cols = 256 * 11;
  const std::vector<float> xa = normal_values(cols, 4);
  ActRows a;
  a.convert(xa.data(), 1, cols, cols, DType::Q8_K);
  const auto* ar = static_cast<const BlockQ8_K*>(a.row(0));
  for (const auto& p : kg().types) {
    for (bool ggml_quantised : {false, true}) {
      const std::vector<float> xw = normal_values(rows * cols, 5);
      const size_t rb = dtype_row_bytes(p.t, cols);
      std::vector<uint8_t> w(rb * rows);
      for (int64_t o = 0; o < rows; ++o) {
        if (ggml_quantised) p.quant(xw.data() + o * cols, w.data() + o * rb, cols);
        else quantize_row(p.t, xw.data() + o * cols, w.data() + o * rb, cols);
      }
      const MatRef m{p.t, w.data(), rows, cols, rb};
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
        isa_force(isa);
        std::vector<float> y(rows);
        matmul(m, a, y.data(), rows, 0, rows, SumOrder::VecDot);
        isa_force(isa_best());
        for (int64_t o = 0; o < rows; ++o) {
          float want = 0;
          p.dot(static_cast<int>(cols), &want, 0, w.data() + o * rb, 0, ar, 0, 1);
          const float twin = detail::kquant_dot_ref(p.t, w.data() + o * rb, ar, cols, rows, SumOrder::VecDot);
          EXPECT_EQ(twin, want) << dtype_name(p.t) << " twin row " << o << (ggml_quantised ? " ggml-quantised" : "");
          EXPECT_EQ(y[o], want) << dtype_name(p.t) << " " << isa_name(isa) << " row " << o;
        }
      }
    }
  }
}

// llama.cpp's repacked Q4_K layout for 8 rows (block_q4_Kx8, as ggml's gemv/gemm read it): the
// 8 rows' fp16 d and dmin, then per sub-block j the 8 rows' scales and mins packed like one
// Q4_K's 12 scale bytes, then the rows' qs bytes interleaved in chunks of 8 (chunk c of row r at
// 64 c + 8 r).
struct BlockQ4_Kx8 {
  uint16_t d[8], dmin[8];
  uint8_t scales[96];
  uint8_t qs[1024];
};

std::vector<BlockQ4_Kx8> repack_q4_k_x8(const uint8_t* w, size_t rb, int64_t rows, int64_t nb) {
  std::vector<BlockQ4_Kx8> out(static_cast<size_t>(rows / 8 * nb));
  for (int64_t g = 0; g < rows / 8; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ4_Kx8& o = out[g * nb + b];
      uint8_t sc[8][8], mn[8][8];  // [sub-block][row]
      for (int r = 0; r < 8; ++r) {
        const auto& blk = reinterpret_cast<const BlockQ4_K*>(w + (8 * g + r) * rb)[b];
        o.d[r] = blk.d, o.dmin[r] = blk.dmin;
        for (int j = 0; j < 8; ++j) {
          int s, m;
          k4_scale_min(blk.scales, j, &s, &m);
          sc[j][r] = static_cast<uint8_t>(s), mn[j][r] = static_cast<uint8_t>(m);
        }
        for (int c = 0; c < 16; ++c) std::memcpy(o.qs + 64 * c + 8 * r, blk.qs + 8 * c, 8);
      }
      for (int j = 0; j < 8; ++j) k4_pack_scales(sc[j], mn[j], o.scales + 12 * j);
    }
  return out;
}

// The blocks twin gives the bits of llama.cpp's repacked kernels themselves: the single-row gemv
// (decoding, MoE experts) and the 4-row gemm (prompt batches), on our and on ggml's weights.
TEST(GgmlKQuant, Q4KBlockTwinIsGgmlRepackedGemvAndGemm) {
  REQUIRE_KGGML();
  using GemFn = void (*)(int, float*, size_t, const void*, const void*, int, int);
  using MatQFn = void (*)(const float*, void*, int64_t);
  const auto& g = testing::ggml_libs();
  const auto gemv = g.sym<GemFn>(g.cpu, "ggml_gemv_q4_K_8x8_q8_K");
  const auto gemm = g.sym<GemFn>(g.cpu, "ggml_gemm_q4_K_8x8_q8_K");
  const auto mat_q8_k = g.sym<MatQFn>(g.cpu, "ggml_quantize_mat_q8_K_4x8");
  if (!gemv || !gemm || !mat_q8_k) GTEST_SKIP() << "ggml's repacked Q4_K kernels are not exported";
  const int64_t rows = 16, cols = 256 * 5, nb = cols / 256, n_act = 4;
  const std::vector<float> xw = normal_values(rows * cols, 8), xa = normal_values(n_act * cols, 9);
  const size_t rb = dtype_row_bytes(DType::Q4_K, cols);
  ActRows a;
  a.convert(xa.data(), n_act, cols, cols, DType::Q8_K);
  std::vector<uint8_t> act4(static_cast<size_t>(nb) * (4 * sizeof(float) + 1024 + 64 * sizeof(int16_t)));
  mat_q8_k(xa.data(), act4.data(), cols);
  for (bool ggml_quantised : {false, true}) {
    std::vector<uint8_t> w(rb * rows);
    for (int64_t o = 0; o < rows; ++o) {
      if (ggml_quantised) kg().types.front().quant(xw.data() + o * cols, w.data() + o * rb, cols);
      else quantize_row(DType::Q4_K, xw.data() + o * cols, w.data() + o * rb, cols);
    }
    const std::vector<BlockQ4_Kx8> packed = repack_q4_k_x8(w.data(), rb, rows, nb);
    std::vector<float> y_gemm(n_act * rows);
    gemm(static_cast<int>(cols), y_gemm.data(), rows, packed.data(), act4.data(), static_cast<int>(n_act), static_cast<int>(rows));
    for (int64_t r = 0; r < n_act; ++r) {
      std::vector<float> y_gemv(rows);
      gemv(static_cast<int>(cols), y_gemv.data(), rows, packed.data(), a.row(r), 1, static_cast<int>(rows));
      for (int64_t o = 0; o < rows; ++o) {
        const auto* wr = reinterpret_cast<const BlockQ4_K*>(w.data() + o * rb);
        const auto* ar = static_cast<const BlockQ8_K*>(a.row(r));
        EXPECT_EQ(detail::q4_k_dot_blocks_ref(wr, ar, nb, 256), y_gemv[o])
            << "gemv act " << r << " row " << o << (ggml_quantised ? " ggml-quantised" : "");
        EXPECT_EQ(detail::q4_k_dot_blocks_ref(wr, ar, nb, 64), y_gemm[r * rows + o])
            << "gemm act " << r << " row " << o << (ggml_quantised ? " ggml-quantised" : "");
      }
    }
  }
}

// Q4_K matrices with a multiple of 8 rows, in both repacked orders: every path gives the twins'
// bits for any split of the output rows, and the twins stay within float order of ggml's vec_dot.
TEST(GgmlKQuant, Q4KBlockOrdersMatchTheirTwins) {
  REQUIRE_KGGML();
  const int64_t rows = 40, cols = 256 * 9;
  const std::vector<float> xw = normal_values(rows * cols, 6), xa = normal_values(3 * cols, 7);
  const size_t rb = dtype_row_bytes(DType::Q4_K, cols);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t o = 0; o < rows; ++o) quantize_row(DType::Q4_K, xw.data() + o * cols, w.data() + o * rb, cols);
  const MatRef m{DType::Q4_K, w.data(), rows, cols, rb};
  ActRows a;
  a.convert(xa.data(), 3, cols, cols, DType::Q8_K);
  for (SumOrder order : {SumOrder::Gemm, SumOrder::VecDot})
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
      isa_force(isa);
      std::vector<float> y(3 * rows);
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 17}, {17, 21}, {21, 40}}) matmul(m, a, y.data(), rows, b, e, order);
      isa_force(isa_best());
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t o = 0; o < rows; ++o) {
          const auto* wr = reinterpret_cast<const BlockQ4_K*>(w.data() + o * rb);
          const auto* arow = static_cast<const BlockQ8_K*>(a.row(r));
          EXPECT_EQ(y[r * rows + o], detail::q4_k_dot_blocks_ref(wr, arow, cols / 256, detail::q4_k_group(order)))
              << isa_name(isa) << " row " << o;
          float want = 0;
          kg().types.front().dot(static_cast<int>(cols), &want, 0, wr, 0, arow, 0, 1);
          EXPECT_NEAR(y[r * rows + o], want, 2e-4f * (1.0f + std::fabs(want)));  // acc - accm cancels
        }
    }
}

// llama.cpp's repacked Q2_K layout for 8 rows (block_q2_Kx8): the 8 rows' fp16 d and dmin; the
// scale bytes of sub-blocks 2i, 2i + 1 of the 8 rows in bytes 16i.. (row r's at 16i + 2r and 16i
// + 2r + 1); the rows' qs bytes interleaved in chunks of 8 (chunk c of row r at 64 c + 8 r).
struct BlockQ2_Kx8 {
  uint16_t d[8], dmin[8];
  uint8_t scales[128];
  uint8_t qs[512];
};

std::vector<BlockQ2_Kx8> repack_q2_k_x8(const uint8_t* w, size_t rb, int64_t rows, int64_t nb) {
  std::vector<BlockQ2_Kx8> out(static_cast<size_t>(rows / 8 * nb));
  for (int64_t g = 0; g < rows / 8; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ2_Kx8& o = out[g * nb + b];
      for (int r = 0; r < 8; ++r) {
        const auto& blk = reinterpret_cast<const BlockQ2_K*>(w + (8 * g + r) * rb)[b];
        o.d[r] = blk.d, o.dmin[r] = blk.dmin;
        for (int c = 0; c < 8; ++c) std::memcpy(o.qs + 64 * c + 8 * r, blk.qs + 8 * c, 8);
        for (int i = 0; i < 8; ++i) o.scales[16 * i + 2 * r] = blk.scales[2 * i], o.scales[16 * i + 2 * r + 1] = blk.scales[2 * i + 1];
      }
    }
  return out;
}

const KGgml::PerType& per_type(DType t) {
  for (const auto& p : kg().types)
    if (p.t == t) return p;
  throw std::logic_error("type not in the table");
}

// Q2_K matrices with a multiple of 8 rows: the blocks twin gives the bits of llama.cpp's repacked
// gemv (single rows) and gemm (batches of 4 rows), on our and on ggml's weights.
TEST(GgmlKQuant, Q2KBlockTwinIsGgmlRepackedGemvAndGemm) {
  REQUIRE_KGGML();
  using GemFn = void (*)(int, float*, size_t, const void*, const void*, int, int);
  using MatQFn = void (*)(const float*, void*, int64_t);
  const auto& g = testing::ggml_libs();
  const auto gemv = g.sym<GemFn>(g.cpu, "ggml_gemv_q2_K_8x8_q8_K");
  const auto gemm = g.sym<GemFn>(g.cpu, "ggml_gemm_q2_K_8x8_q8_K");
  const auto mat_q8_k = g.sym<MatQFn>(g.cpu, "ggml_quantize_mat_q8_K_4x8");
  if (!gemv || !gemm || !mat_q8_k) GTEST_SKIP() << "ggml's repacked Q2_K kernels are not exported";
  const int64_t rows = 16, cols = 256 * 5, nb = cols / 256, n_act = 4;
  const std::vector<float> xw = normal_values(rows * cols, 18), xa = normal_values(n_act * cols, 19);
  const size_t rb = dtype_row_bytes(DType::Q2_K, cols);
  ActRows a;
  a.convert(xa.data(), n_act, cols, cols, DType::Q8_K);
  std::vector<uint8_t> act4(static_cast<size_t>(nb) * (4 * sizeof(float) + 1024 + 64 * sizeof(int16_t)));
  mat_q8_k(xa.data(), act4.data(), cols);
  for (bool ggml_quantised : {false, true}) {
    std::vector<uint8_t> w(rb * rows);
    for (int64_t o = 0; o < rows; ++o) {
      if (ggml_quantised) per_type(DType::Q2_K).quant(xw.data() + o * cols, w.data() + o * rb, cols);
      else quantize_row(DType::Q2_K, xw.data() + o * cols, w.data() + o * rb, cols);
    }
    const std::vector<BlockQ2_Kx8> packed = repack_q2_k_x8(w.data(), rb, rows, nb);
    std::vector<float> y_gemm(n_act * rows);
    gemm(static_cast<int>(cols), y_gemm.data(), rows, packed.data(), act4.data(), static_cast<int>(n_act), static_cast<int>(rows));
    for (int64_t r = 0; r < n_act; ++r) {
      std::vector<float> y_gemv(rows);
      gemv(static_cast<int>(cols), y_gemv.data(), rows, packed.data(), a.row(r), 1, static_cast<int>(rows));
      for (int64_t o = 0; o < rows; ++o) {
        const auto* wr = reinterpret_cast<const BlockQ2_K*>(w.data() + o * rb);
        const auto* ar = static_cast<const BlockQ8_K*>(a.row(r));
        EXPECT_EQ(detail::q2_k_dot_blocks_ref(wr, ar, nb, detail::q2_k_group(SumOrder::VecDot)), y_gemv[o])
            << "gemv act " << r << " row " << o << (ggml_quantised ? " ggml-quantised" : "");
        EXPECT_EQ(detail::q2_k_dot_blocks_ref(wr, ar, nb, detail::q2_k_group(SumOrder::Gemm)), y_gemm[r * rows + o])
            << "gemm act " << r << " row " << o << (ggml_quantised ? " ggml-quantised" : "");
      }
    }
  }
}

// Q2_K matrices with a multiple of 8 rows: every path gives the blocks twin's bits for any split
// of the output rows, and the twin stays within float order of ggml's vec_dot.
TEST(GgmlKQuant, Q2KBlockOrdersMatchTheirTwins) {
  REQUIRE_KGGML();
  const int64_t rows = 40, cols = 256 * 9;
  const std::vector<float> xw = normal_values(rows * cols, 16), xa = normal_values(3 * cols, 17);
  const size_t rb = dtype_row_bytes(DType::Q2_K, cols);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t o = 0; o < rows; ++o) quantize_row(DType::Q2_K, xw.data() + o * cols, w.data() + o * rb, cols);
  const MatRef m{DType::Q2_K, w.data(), rows, cols, rb};
  ActRows a;
  a.convert(xa.data(), 3, cols, cols, DType::Q8_K);
  for (SumOrder order : {SumOrder::Gemm, SumOrder::VecDot})
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
      isa_force(isa);
      std::vector<float> y(3 * rows);
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 17}, {17, 21}, {21, 40}}) matmul(m, a, y.data(), rows, b, e, order);
      isa_force(isa_best());
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t o = 0; o < rows; ++o) {
          const auto* wr = reinterpret_cast<const BlockQ2_K*>(w.data() + o * rb);
          const auto* arow = static_cast<const BlockQ8_K*>(a.row(r));
          EXPECT_EQ(y[r * rows + o], detail::q2_k_dot_blocks_ref(wr, arow, cols / 256, detail::q2_k_group(order)))
              << isa_name(isa) << " row " << o;
          float want = 0;
          per_type(DType::Q2_K).dot(static_cast<int>(cols), &want, 0, wr, 0, arow, 0, 1);
          EXPECT_NEAR(y[r * rows + o], want, 2e-4f * (1.0f + std::fabs(want)));  // acc - accm cancels
        }
    }
}

// IQ4_XS through ggml's own matrix product (ggml_mul_mat, computed by the CPU library's graph code,
// as llama.cpp runs it): with a multiple of 8 weight rows and 8 or more activation rows ggml takes
// its IQ panel gemm (ggml-cpu/iqp.cpp), whose bits are the blocks twin's, and so are every path's
// (the engine's order for such matrices, whatever the row count); with fewer activation rows ggml
// takes vec_dot's lanes order instead, which the engine does not follow (batch invariance).
TEST(GgmlKQuant, IQ4XSBlockOrderIsGgmlPanelGemm) {
  REQUIRE_KGGML();
  constexpr int kTypeIQ4_XS = 23;  // enum ggml_type
  const int64_t rows = 24, cols = 256 * 3, nb = cols / 256;
  const size_t rb = dtype_row_bytes(DType::IQ4_XS, cols);
  const std::vector<float> xw = normal_values(rows * cols, 10);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t o = 0; o < rows; ++o) quantize_row(DType::IQ4_XS, xw.data() + o * cols, w.data() + o * rb, cols);
  const MatRef m{DType::IQ4_XS, w.data(), rows, cols, rb};
  for (int64_t n_act : {9, 3}) {
    const std::vector<float> xa = normal_values(n_act * cols, 11 + static_cast<uint32_t>(n_act));
    const auto got = testing::ggml_mul_mat(kTypeIQ4_XS, w.data(), w.size(), rows, cols, xa.data(), n_act);
    if (!got) GTEST_SKIP() << "ggml's graph API is not exported";
    ASSERT_FALSE(got->empty()) << "ggml_graph_compute_with_ctx failed";
    const std::vector<float>& want = *got;
    ActRows a;
    a.convert(xa.data(), n_act, cols, cols, DType::Q8_K);
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
      isa_force(isa);
      std::vector<float> y(n_act * rows);
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 5}, {5, 24}})
        matmul(m, a, y.data(), rows, b, e, SumOrder::VecDot);
      isa_force(isa_best());
      for (int64_t r = 0; r < n_act; ++r)
        for (int64_t o = 0; o < rows; ++o) {
          const auto* wr = reinterpret_cast<const BlockIQ4_XS*>(w.data() + o * rb);
          const auto* ar = static_cast<const BlockQ8_K*>(a.row(r));
          const float blocks = detail::iq4_xs_dot_blocks_ref(wr, ar, nb);
          EXPECT_EQ(y[r * rows + o], blocks) << isa_name(isa) << " act " << r << " row " << o;
          if (n_act >= 8) EXPECT_EQ(blocks, want[r * rows + o]) << "panel gemm, act " << r << " row " << o;
          else
            EXPECT_EQ(detail::iq4_xs_dot_lanes8_ref(wr, ar, nb), want[r * rows + o]) << "vec_dot, act " << r << " row " << o;
        }
    }
  }
}

}  // namespace
}  // namespace clover::kernels
