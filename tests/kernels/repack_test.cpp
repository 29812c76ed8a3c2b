// The tile layouts (kernels/repack.h): Q4_0x16 for Q4_0, Kx16 for Q4_K, IQ4_XS and Q5_K. Repacking is
// lossless and in place, each layout is the one documented, and every matmul path gives on a
// repacked matrix the bits it gives on the file's rows.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/convert.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"

namespace clover::kernels {
namespace {

struct Matrix {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> data;
  MatRef ref() { return MatRef{type, data.data(), rows, cols, dtype_row_bytes(type, cols)}; }
};

// Random rows quantised to t (K-quant super-blocks take varied scales and mins).
Matrix random_matrix(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m{t, rows, cols, std::vector<uint8_t>(static_cast<size_t>(rows) * dtype_row_bytes(t, cols))};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> spread(0.1f, 3.0f), shift(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t o = 0; o < rows; ++o) {
    for (int64_t i = 0; i < cols; i += 32) {
      const float s = spread(rng), c = shift(rng);
      for (int64_t j = i; j < i + 32; ++j) row[j] = c + s * nd(rng);
    }
    quantize_row(t, row.data(), m.data.data() + o * dtype_row_bytes(t, cols), cols);
  }
  return m;
}

bool isa_available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(isa_best()); }

constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_K, DType::IQ4_XS, DType::Q5_K};
Layout layout_of(DType t) { return t == DType::Q4_0 ? Layout::Q4_0x16 : Layout::Kx16; }

TEST(Repack, RoundTripsAndRepacksInPlace) {
  std::mt19937 rng(7);
  for (DType t : kTypes) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 256}, {48, 768}, {32, 2048}, {512, 512}}) {
      Matrix m = random_matrix(t, rows, cols, rng);
      const std::vector<uint8_t> original = m.data;
      std::vector<uint8_t> packed(original.size());
      ASSERT_EQ(repack_layout(m.ref()), layout_of(t));
      const MatRef p = repack(m.ref(), packed.data());
      EXPECT_EQ(p.layout, layout_of(t));
      EXPECT_EQ(p.data, packed.data());
      EXPECT_NE(0, std::memcmp(packed.data(), original.data(), packed.size())) << "the layout is not the file's";
      std::vector<uint8_t> back(original.size());
      unpack_rows(p, 0, rows, back.data());
      EXPECT_EQ(back, original) << dtype_name(t) << " " << rows << "x" << cols;
      // Any run of rows, across tile boundaries.
      std::uniform_int_distribution<int64_t> ur(0, rows - 1);
      const size_t rb = dtype_row_bytes(t, cols);
      for (int i = 0; i < 8; ++i) {
        const int64_t r0 = ur(rng), n = std::uniform_int_distribution<int64_t>(0, rows - r0)(rng);
        std::vector<uint8_t> part(static_cast<size_t>(n) * rb);
        unpack_rows(p, r0, n, part.data());
        EXPECT_EQ(0, std::memcmp(part.data(), original.data() + r0 * rb, part.size()))
            << dtype_name(t) << " rows " << r0 << "+" << n;
      }
      // In place: the same bytes as into a separate buffer.
      const MatRef q = repack(m.ref(), m.data.data());
      EXPECT_EQ(q.data, m.data.data());
      EXPECT_EQ(m.data, packed) << dtype_name(t);
    }
  }
}

TEST(Repack, Q4_0LayoutIsTheDocumentedOne) {
  std::mt19937 rng(11);
  const int64_t rows = 32, cols = 128, nb = cols / 32;
  Matrix m = random_matrix(DType::Q4_0, rows, cols, rng);
  std::vector<uint8_t> packed(m.data.size());
  repack(m.ref(), packed.data());
  const size_t rs = dtype_row_bytes(DType::Q4_0, cols);
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t b = 0; b < nb; ++b) {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(m.data.data() + o * rs)[b];
      const uint8_t* tile = packed.data() + (o / 16) * 16 * rs;
      const int r = static_cast<int>(o % 16);
      uint16_t d;
      std::memcpy(&d, tile + (b * 16 + r) * 2, 2);
      ASSERT_EQ(d, blk.d) << "scale of row " << o << " block " << b;
      for (int k = 0; k < 16; ++k)
        ASSERT_EQ(tile[nb * 32 + b * 256 + (k / 4) * 64 + r * 4 + k % 4], blk.qs[k]) << "row " << o << " block " << b << " byte " << k;
    }
}

// Kx16: dword j of super-block b of row r at b * 16 * B + j * 64 + r * 4 of its tile; for Q4_K
// dword 0 holds d and dmin, dwords 1..3 the scales, dwords 4..35 the qs.
TEST(Repack, K4LayoutIsTheDocumentedOne) {
  std::mt19937 rng(13);
  for (DType t : {DType::Q4_K, DType::IQ4_XS, DType::Q5_K}) {
    const int64_t rows = 48, cols = 768, nb = cols / 256;
    const size_t B = dtype_row_bytes(t, 256), rs = dtype_row_bytes(t, cols);
    Matrix m = random_matrix(t, rows, cols, rng);
    std::vector<uint8_t> packed(m.data.size());
    repack(m.ref(), packed.data());
    for (int64_t o = 0; o < rows; ++o)
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = m.data.data() + o * rs + b * B;
        const uint8_t* tile = packed.data() + (o / 16) * 16 * rs;
        for (size_t i = 0; i < B; ++i)
          ASSERT_EQ(tile[b * 16 * B + (i / 4) * 64 + (o % 16) * 4 + i % 4], blk[i])
              << dtype_name(t) << " row " << o << " super-block " << b << " byte " << i;
      }
    if (t == DType::Q4_K) {  // d of row 5, super-block 1: the low half of lane 5 of its first vector
      const auto& blk = reinterpret_cast<const BlockQ4_K*>(m.data.data() + 5 * rs)[1];
      uint16_t d;
      std::memcpy(&d, packed.data() + 1 * 16 * B + 5 * 4, 2);
      EXPECT_EQ(d, blk.d);
    }
  }
}

TEST(Repack, RefusesWhatItCannotRepack) {
  std::mt19937 rng(3);
  for (DType t : kTypes) {
    const int64_t cols = 256;
    Matrix m = random_matrix(t, 24, cols, rng);  // 24 rows: not whole tiles
    std::vector<uint8_t> out(m.data.size());
    EXPECT_EQ(repack_layout(m.ref()), Layout::RowMajor);
    EXPECT_THROW(repack(m.ref(), out.data()), std::invalid_argument);
    Matrix ok = random_matrix(t, 16, cols, rng);
    MatRef padded = ok.ref();
    padded.row_stride += 4;  // rows not contiguous (16 of them, whole blocks)
    EXPECT_EQ(repack_layout(padded), Layout::RowMajor);
    const MatRef p = repack(ok.ref(), out.data());
    EXPECT_EQ(repack_layout(p), Layout::RowMajor) << "already repacked";
    EXPECT_THROW(repack_tiles(ok.ref(), out.data(), 0, 2), std::invalid_argument) << "tiles outside the matrix";
    EXPECT_THROW(unpack_rows(p, 10, 7, out.data()), std::invalid_argument);
    // A matmul refuses a tiled reference that is not whole tiles of its layout's type.
    MatRef bad = p;
    bad.rows = 8;
    ActRows acts;
    std::vector<float> x(cols, 0.5f);
    acts.convert(x.data(), 1, cols, cols, activation_type(t));
    std::vector<float> y(16);
    EXPECT_THROW(matmul(bad, acts, y.data(), 16, 0, 8), std::invalid_argument) << dtype_name(t);
    MatRef wrong = p;
    wrong.layout = t == DType::Q4_0 ? Layout::Kx16 : Layout::Q4_0x16;
    EXPECT_THROW(matmul(wrong, acts, y.data(), 16, 0, 16), std::invalid_argument) << dtype_name(t);
  }
  // Types without a tile layout.
  std::mt19937 rng2(5);
  for (DType t : {DType::Q8_0, DType::Q6_K, DType::Q2_K, DType::F32}) {
    Matrix m = random_matrix(t, 16, 256, rng2);
    EXPECT_EQ(repack_layout(m.ref()), Layout::RowMajor) << dtype_name(t);
  }
  Matrix k = random_matrix(DType::Q4_K, 16, 512, rng2);
  MatRef part = k.ref();
  part.cols = 384, part.row_stride = dtype_row_bytes(DType::Q4_K, 384);  // rows contiguous, not whole super-blocks
  EXPECT_EQ(repack_layout(part), Layout::RowMajor);
  part.cols = 256;  // the same stride, whole super-blocks: the check above was the columns'
  EXPECT_EQ(repack_layout(part), Layout::Kx16);
}

// Every ISA, every output range and number of activation rows: the repacked matrix's results are
// the row-major matrix's, bit for bit (same path), and the scalar twin agrees with itself too.
TEST(Repack, MatmulGivesTheRowMajorBitsOnEveryPath) {
  std::mt19937 rng(2024);
  struct Shape { int64_t rows, cols, n; };
  const Shape shapes[] = {{16, 256, 1}, {32, 512, 3}, {48, 2048, 1}, {64, 768, 9}, {128, 512, 17}, {512, 2048, 2}, {16, 4096, 33}};
  for (DType t : kTypes) {
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (!isa_available(isa)) continue;
      isa_force(isa);
      for (const Shape& s : shapes) {
        Matrix m = random_matrix(t, s.rows, s.cols, rng);
        std::vector<uint8_t> packed(m.data.size());
        const MatRef p = repack(m.ref(), packed.data());
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(s.n * s.cols));
        for (float& v : x) v = nd(rng);
        ActRows acts;
        acts.convert(x.data(), s.n, s.cols, s.cols, activation_type(t));
        const size_t ny = static_cast<size_t>(s.n * s.rows);
        // Whole range, then output ranges that start and end inside tiles (threads' chunks).
        std::vector<std::pair<int64_t, int64_t>> ranges = {{0, s.rows}};
        std::uniform_int_distribution<int64_t> uo(0, s.rows);
        for (int i = 0; i < 6; ++i) {
          int64_t a = uo(rng), b = uo(rng);
          if (a > b) std::swap(a, b);
          ranges.push_back({a, b});
        }
        for (SumOrder order : {SumOrder::Gemm, SumOrder::VecDot})
          for (auto [ob, oe] : ranges) {
            std::vector<float> want(ny, -1.0f), got(ny, -1.0f);
            matmul(m.ref(), acts, want.data(), s.rows, ob, oe, order);
            matmul(p, acts, got.data(), s.rows, ob, oe, order);
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), ny * sizeof(float)))
                << dtype_name(t) << " " << isa_name(isa) << " " << s.rows << "x" << s.cols << " n " << s.n << " rows [" << ob
                << ", " << oe << ") order " << static_cast<int>(order);
          }
        // Selected activation rows (the experts' products).
        std::vector<int32_t> sel;
        for (int64_t r = s.n - 1; r >= 0; r -= 2) sel.push_back(static_cast<int32_t>(r));
        std::vector<float> want(sel.size() * s.rows), got(want.size());
        matmul_selected(m.ref(), acts, sel.data(), static_cast<int64_t>(sel.size()), want.data(), s.rows, 0, s.rows,
                        SumOrder::VecDot);
        matmul_selected(p, acts, sel.data(), static_cast<int64_t>(sel.size()), got.data(), s.rows, 0, s.rows,
                        SumOrder::VecDot);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << dtype_name(t) << " " << isa_name(isa) << " selected";
        // The scalar twin reads the layout too, and on the K-quants the AVX-512 kernel on the
        // repacked matrix is the twin bit for bit (Q4_0's twin has an order of its own:
        // matmul_test compares the Q4_0 paths with a tolerance).
        std::vector<float> rw(ny), rg(ny), fast(ny);
        matmul_ref(m.ref(), acts, rw.data(), s.rows, 0, s.rows);
        matmul_ref(p, acts, rg.data(), s.rows, 0, s.rows);
        ASSERT_EQ(0, std::memcmp(rw.data(), rg.data(), ny * sizeof(float))) << dtype_name(t) << " matmul_ref";
        if (dtype_is_kquant(t)) {
          matmul(p, acts, fast.data(), s.rows, 0, s.rows);
          ASSERT_EQ(0, std::memcmp(rw.data(), fast.data(), ny * sizeof(float))) << dtype_name(t) << " against the twin";
        }
      }
    }
  }
  isa_force(isa_best());
}

}  // namespace
}  // namespace clover::kernels
