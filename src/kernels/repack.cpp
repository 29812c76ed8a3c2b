// The tile layouts (repack.h), written and read back.
#include "kernels/repack.h"

#include <cstring>
#include <stdexcept>
#include <vector>

namespace clover::kernels {

namespace {

// ---- Q4_0x16 ----

constexpr size_t kScaleBytes = sizeof(uint16_t);
constexpr size_t kQsBytes = sizeof(BlockQ4_0::qs);  // 16
static_assert(sizeof(BlockQ4_0) == kScaleBytes + kQsBytes);

// Byte offsets inside a tile of nb block columns.
size_t scale_at(int64_t b, int r) {
  return (static_cast<size_t>(b) * kTileRows + r) * kScaleBytes;
}
size_t qs_at(int64_t nb, int64_t b, int r, int byte) {  // qs byte `byte` (0..15) of block b of row r
  const int m = byte / 4, j = byte % 4;
  return static_cast<size_t>(nb) * kTileRows * kScaleBytes + static_cast<size_t>(b) * kTileRows * kQsBytes +
         static_cast<size_t>(m) * 64 + static_cast<size_t>(r) * 4 + j;
}

// One tile: 16 row-major rows (src) to the tile layout (dst); they must not overlap.
void pack_q4_0_tile(const uint8_t* src, size_t row_stride, int64_t nb, uint8_t* dst) {
  for (int r = 0; r < kTileRows; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_0*>(src + r * row_stride);
    for (int64_t b = 0; b < nb; ++b) {
      std::memcpy(dst + scale_at(b, r), &blocks[b].d, kScaleBytes);
      for (int k = 0; k < static_cast<int>(kQsBytes); k += 4) std::memcpy(dst + qs_at(nb, b, r, k), blocks[b].qs + k, 4);
    }
  }
}

// Row r of a tile back to its row-major blocks.
void unpack_q4_0_tile_row(const uint8_t* tile, int64_t nb, int r, uint8_t* dst) {
  auto* blocks = reinterpret_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < nb; ++b) {
    std::memcpy(&blocks[b].d, tile + scale_at(b, r), kScaleBytes);
    for (int k = 0; k < static_cast<int>(kQsBytes); k += 4) std::memcpy(blocks[b].qs + k, tile + qs_at(nb, b, r, k), 4);
  }
}

// ---- Kx16 ----

// Where dword j of super-block b of row r lies in a tile of blocks of `block` bytes.
size_t dword_at(size_t block, int64_t b, int r, size_t j) {
  return static_cast<size_t>(b) * kTileRows * block + j * 64 + static_cast<size_t>(r) * 4;
}

void pack_k_tile(const uint8_t* src, size_t row_stride, size_t block, int64_t nb, uint8_t* dst) {
  for (int r = 0; r < kTileRows; ++r)
    for (int64_t b = 0; b < nb; ++b)
      for (size_t j = 0; j < block / 4; ++j) std::memcpy(dst + dword_at(block, b, r, j), src + r * row_stride + b * block + 4 * j, 4);
}

void unpack_k_tile_row(const uint8_t* tile, size_t block, int64_t nb, int r, uint8_t* dst) {
  for (int64_t b = 0; b < nb; ++b)
    for (size_t j = 0; j < block / 4; ++j) std::memcpy(dst + b * block + 4 * j, tile + dword_at(block, b, r, j), 4);
}

}  // namespace

Layout repack_layout(const MatRef& m) {
  Layout to;
  switch (m.type) {
    case DType::Q4_0: to = Layout::Q4_0x16; break;
    case DType::Q4_K:
    case DType::IQ4_XS:
    case DType::Q5_K: to = Layout::Kx16; break;
    default: return Layout::RowMajor;
  }
  const bool ok = m.layout == Layout::RowMajor && m.rows > 0 && m.rows % kTileRows == 0 && m.cols > 0 &&
                  m.cols % dtype_block_size(m.type) == 0 && m.row_stride == dtype_row_bytes(m.type, m.cols);
  return ok ? to : Layout::RowMajor;
}

bool layout_has_kernel(Layout l, Isa isa) {
  return l == Layout::RowMajor || isa == Isa::Avx512 || (isa == Isa::Avx2 && l == Layout::Q4_0x16);
}

Layout repack_layout(const MatRef& m, Isa isa) {
  const Layout to = repack_layout(m);
  return layout_has_kernel(to, isa) ? to : Layout::RowMajor;
}

void repack_tiles(const MatRef& m, void* dst, int64_t tile_begin, int64_t tile_end) {
  const Layout to = repack_layout(m);
  if (to == Layout::RowMajor)
    throw std::invalid_argument("repack: not a row-major Q4_0, Q4_K, IQ4_XS or Q5_K matrix of 16-row tiles");
  if (tile_begin < 0 || tile_end > m.rows / kTileRows) throw std::invalid_argument("repack: tiles outside the matrix");
  const int64_t nb = m.cols / dtype_block_size(m.type);
  const size_t block = dtype_block_bytes(m.type);
  const size_t tile_bytes = kTileRows * m.row_stride;
  std::vector<uint8_t> tmp(tile_bytes);
  const auto* src = static_cast<const uint8_t*>(m.data);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const size_t at = static_cast<size_t>(t) * tile_bytes;
    // Through tmp: dst may be src.
    if (to == Layout::Q4_0x16) pack_q4_0_tile(src + at, m.row_stride, nb, tmp.data());
    else pack_k_tile(src + at, m.row_stride, block, nb, tmp.data());
    std::memcpy(out + at, tmp.data(), tile_bytes);
  }
}

MatRef repack(const MatRef& m, void* dst) {
  repack_tiles(m, dst, 0, m.rows / kTileRows);
  MatRef r = m;
  r.data = dst;
  r.layout = repack_layout(m);
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
  const int64_t nb = m.cols / dtype_block_size(m.type);
  const size_t block = dtype_block_bytes(m.type);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = row0 + i;
    const uint8_t* tile = base + static_cast<size_t>(o / kTileRows) * kTileRows * m.row_stride;
    const int r = static_cast<int>(o % kTileRows);
    if (m.layout == Layout::Q4_0x16) unpack_q4_0_tile_row(tile, nb, r, out + i * row_bytes);
    else unpack_k_tile_row(tile, block, nb, r, out + i * row_bytes);
  }
}

}  // namespace clover::kernels
