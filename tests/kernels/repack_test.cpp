// The Q4_0x16 layout (kernels/repack.h): repacking is lossless and in place, the layout is the one
// documented, and every matmul path gives on a repacked matrix the bits it gives on the file's rows.
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

struct Q4Matrix {
  int64_t rows, cols;
  std::vector<uint8_t> data;
  MatRef ref() { return MatRef{DType::Q4_0, data.data(), rows, cols, dtype_row_bytes(DType::Q4_0, cols)}; }
};

Q4Matrix random_q4_0(int64_t rows, int64_t cols, std::mt19937& rng) {
  Q4Matrix m{rows, cols, std::vector<uint8_t>(static_cast<size_t>(rows) * dtype_row_bytes(DType::Q4_0, cols))};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t o = 0; o < rows; ++o) {
    for (float& v : row) v = nd(rng);
    quantize_row(DType::Q4_0, row.data(), m.data.data() + o * dtype_row_bytes(DType::Q4_0, cols), cols);
  }
  return m;
}

bool isa_available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(isa_best()); }

TEST(Repack, RoundTripsAndRepacksInPlace) {
  std::mt19937 rng(7);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 32}, {48, 96}, {32, 2048}, {512, 256}}) {
    Q4Matrix m = random_q4_0(rows, cols, rng);
    const std::vector<uint8_t> original = m.data;
    std::vector<uint8_t> packed(original.size());
    const MatRef p = repack_q4_0_x16(m.ref(), packed.data());
    EXPECT_EQ(p.layout, Layout::Q4_0x16);
    EXPECT_EQ(p.data, packed.data());
    EXPECT_NE(0, std::memcmp(packed.data(), original.data(), packed.size())) << "the layout is not the file's";
    std::vector<uint8_t> back(original.size());
    unpack_rows(p, 0, rows, back.data());
    EXPECT_EQ(back, original) << rows << "x" << cols;
    // Any run of rows, across tile boundaries.
    std::uniform_int_distribution<int64_t> ur(0, rows - 1);
    const size_t rb = dtype_row_bytes(DType::Q4_0, cols);
    for (int i = 0; i < 8; ++i) {
      const int64_t r0 = ur(rng), n = std::uniform_int_distribution<int64_t>(0, rows - r0)(rng);
      std::vector<uint8_t> part(static_cast<size_t>(n) * rb);
      unpack_rows(p, r0, n, part.data());
      EXPECT_EQ(0, std::memcmp(part.data(), original.data() + r0 * rb, part.size())) << "rows " << r0 << "+" << n;
    }
    // In place: the same bytes as into a separate buffer.
    const MatRef q = repack_q4_0_x16(m.ref(), m.data.data());
    EXPECT_EQ(q.data, m.data.data());
    EXPECT_EQ(m.data, packed);
  }
}

TEST(Repack, LayoutIsTheDocumentedOne) {
  std::mt19937 rng(11);
  const int64_t rows = 32, cols = 128, nb = cols / 32;
  Q4Matrix m = random_q4_0(rows, cols, rng);
  std::vector<uint8_t> packed(m.data.size());
  repack_q4_0_x16(m.ref(), packed.data());
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

TEST(Repack, RefusesWhatItCannotRepack) {
  std::mt19937 rng(3);
  Q4Matrix m = random_q4_0(24, 64, rng);  // 24 rows: not whole tiles
  std::vector<uint8_t> out(m.data.size());
  EXPECT_FALSE(q4_0_repackable(m.ref()));
  EXPECT_THROW(repack_q4_0_x16(m.ref(), out.data()), std::invalid_argument);
  Q4Matrix ok = random_q4_0(16, 64, rng);
  MatRef padded = ok.ref();
  padded.row_stride += 2, padded.rows = 8;  // rows not contiguous (and too few)
  EXPECT_FALSE(q4_0_repackable(padded));
  MatRef q8 = ok.ref();
  q8.type = DType::Q8_0;
  EXPECT_FALSE(q4_0_repackable(q8));
  const MatRef p = repack_q4_0_x16(ok.ref(), out.data());
  EXPECT_FALSE(q4_0_repackable(p)) << "already repacked";
  EXPECT_THROW(unpack_rows(p, 10, 7, out.data()), std::invalid_argument);
  // A matmul refuses a Q4_0x16 reference that is not whole Q4_0 tiles.
  MatRef bad = p;
  bad.rows = 8;
  ActRows acts;
  std::vector<float> x(64, 0.5f);
  acts.convert(x.data(), 1, 64, 64, DType::Q8_0);
  std::vector<float> y(16);
  EXPECT_THROW(matmul(bad, acts, y.data(), 16, 0, 8), std::invalid_argument);
}

// Every ISA, every output range and number of activation rows: the repacked matrix's results are
// the row-major matrix's, bit for bit (same path), and the scalar twin agrees with itself too.
TEST(Repack, MatmulGivesTheRowMajorBitsOnEveryPath) {
  std::mt19937 rng(2024);
  struct Shape { int64_t rows, cols, n; };
  const Shape shapes[] = {{16, 32, 1}, {32, 64, 3}, {48, 2048, 1}, {64, 160, 9}, {128, 512, 17}, {512, 2048, 2}, {16, 4096, 33}};
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (!isa_available(isa)) continue;
    isa_force(isa);
    for (const Shape& s : shapes) {
      Q4Matrix m = random_q4_0(s.rows, s.cols, rng);
      std::vector<uint8_t> packed(m.data.size());
      const MatRef p = repack_q4_0_x16(m.ref(), packed.data());
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(s.n * s.cols));
      for (float& v : x) v = nd(rng);
      ActRows acts;
      acts.convert(x.data(), s.n, s.cols, s.cols, DType::Q8_0);
      const size_t ny = static_cast<size_t>(s.n * s.rows);
      // Whole range, then output ranges that start and end inside tiles (threads' chunks).
      std::vector<std::pair<int64_t, int64_t>> ranges = {{0, s.rows}};
      std::uniform_int_distribution<int64_t> uo(0, s.rows);
      for (int i = 0; i < 6; ++i) {
        int64_t a = uo(rng), b = uo(rng);
        if (a > b) std::swap(a, b);
        ranges.push_back({a, b});
      }
      for (auto [ob, oe] : ranges) {
        std::vector<float> want(ny, -1.0f), got(ny, -1.0f);
        matmul(m.ref(), acts, want.data(), s.rows, ob, oe);
        matmul(p, acts, got.data(), s.rows, ob, oe);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), ny * sizeof(float)))
            << isa_name(isa) << " " << s.rows << "x" << s.cols << " n " << s.n << " rows [" << ob << ", " << oe << ")";
      }
      // Selected activation rows (the experts' products).
      std::vector<int32_t> sel;
      for (int64_t r = s.n - 1; r >= 0; r -= 2) sel.push_back(static_cast<int32_t>(r));
      std::vector<float> want(sel.size() * s.rows), got(want.size());
      matmul_selected(m.ref(), acts, sel.data(), static_cast<int64_t>(sel.size()), want.data(), s.rows, 0, s.rows);
      matmul_selected(p, acts, sel.data(), static_cast<int64_t>(sel.size()), got.data(), s.rows, 0, s.rows);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << isa_name(isa) << " selected";
      // The scalar twin reads the layout too.
      std::vector<float> rw(ny), rg(ny);
      matmul_ref(m.ref(), acts, rw.data(), s.rows, 0, s.rows);
      matmul_ref(p, acts, rg.data(), s.rows, 0, s.rows);
      ASSERT_EQ(0, std::memcmp(rw.data(), rg.data(), ny * sizeof(float))) << "matmul_ref";
    }
  }
  isa_force(isa_best());
}

}  // namespace
}  // namespace clover::kernels
