// Q4_0x16 repacking (repack.h): the tile layout, written and read back.
#include "kernels/repack.h"

#include <cstring>
#include <stdexcept>
#include <vector>

namespace clover::kernels {

namespace {

constexpr size_t kScaleBytes = sizeof(uint16_t);
constexpr size_t kQsBytes = sizeof(BlockQ4_0::qs);  // 16
static_assert(sizeof(BlockQ4_0) == kScaleBytes + kQsBytes);

// Byte offsets inside a tile of nb block columns.
size_t scale_at(int64_t b, int r) {
  return (static_cast<size_t>(b) * kQ4Tile + r) * kScaleBytes;
}
size_t qs_at(int64_t nb, int64_t b, int r, int byte) {  // qs byte `byte` (0..15) of block b of row r
  const int m = byte / 4, j = byte % 4;
  return static_cast<size_t>(nb) * kQ4Tile * kScaleBytes + static_cast<size_t>(b) * kQ4Tile * kQsBytes +
         static_cast<size_t>(m) * 64 + static_cast<size_t>(r) * 4 + j;
}

// One tile: 16 row-major rows (src) to the tile layout (dst); they must not overlap.
void pack_tile(const uint8_t* src, size_t row_stride, int64_t nb, uint8_t* dst) {
  for (int r = 0; r < kQ4Tile; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_0*>(src + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      std::memcpy(dst + scale_at(b, r), &blocks[b].d, kScaleBytes);
      for (int k = 0; k < static_cast<int>(kQsBytes); k += 4) std::memcpy(dst + qs_at(nb, b, r, k), blocks[b].qs + k, 4);
    }
  }
}

// Row r of a tile back to its row-major blocks.
void unpack_tile_row(const uint8_t* tile, int64_t nb, int r, uint8_t* dst) {
  auto* blocks = reinterpret_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    std::memcpy(&blocks[b].d, tile + scale_at(b, r), kScaleBytes);
    for (int k = 0; k < static_cast<int>(kQsBytes); k += 4) std::memcpy(blocks[b].qs + k, tile + qs_at(nb, b, r, k), 4);
  }
}

}  // namespace

bool q4_0_repackable(const MatRef& m) {
  return m.type == DType::Q4_0 && m.layout == Layout::RowMajor && m.rows > 0 && m.rows % kQ4Tile == 0 &&
         m.cols > 0 && m.cols % kQK == 0 && m.row_stride == dtype_row_bytes(DType::Q4_0, m.cols);
}

void repack_q4_0_x16_tiles(const MatRef& m, void* dst, int64_t tile_begin, int64_t tile_end) {
  if (!q4_0_repackable(m)) throw std::invalid_argument("repack_q4_0_x16: not a row-major Q4_0 matrix of 16-row tiles");
  if (tile_begin < 0 || tile_end > m.rows / kQ4Tile) throw std::invalid_argument("repack_q4_0_x16: tiles outside the matrix");
  const int64_t nb = m.cols / kQK;
  const size_t tile_bytes = kQ4Tile * m.row_stride;
  std::vector<uint8_t> tmp(tile_bytes);
  const auto* src = static_cast<const uint8_t*>(m.data);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const size_t at = static_cast<size_t>(t) * tile_bytes;
    pack_tile(src + at, m.row_stride, nb, tmp.data());  // through tmp: dst may be src
    std::memcpy(out + at, tmp.data(), tile_bytes);
  }
}

MatRef repack_q4_0_x16(const MatRef& m, void* dst) {
  repack_q4_0_x16_tiles(m, dst, 0, m.rows / kQ4Tile);
  MatRef r = m;
  r.data = dst;
  r.layout = Layout::Q4_0x16;
  return r;
}

void unpack_rows(const MatRef& m, int64_t row0, int64_t n, void* dst) {
  if (row0 < 0 || n < 0 || row0 + n > m.rows) throw std::invalid_argument("unpack_rows: rows outside the matrix");
  const auto* base = static_cast<const uint8_t*>(m.data);
  auto* out = static_cast<uint8_t*>(dst);
  const size_t row_bytes = dtype_row_bytes(m.type, m.cols);
  if (m.layout == Layout::RowMajor) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * row_bytes, base + (row0 + i) * m.row_stride, row_bytes);
    return;
  }
  const int64_t nb = m.cols / kQK;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = row0 + i;
    const uint8_t* tile = base + static_cast<size_t>(o / kQ4Tile) * kQ4Tile * m.row_stride;
    unpack_tile_row(tile, nb, static_cast<int>(o % kQ4Tile), out + i * row_bytes);
  }
}

}  // namespace clover::kernels
