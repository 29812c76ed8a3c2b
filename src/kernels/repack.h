// Weight layouts other than the file's row-major one (MatRef::layout): tiles of 16 rows, each in
// the bytes its rows held, arranged as the type's AVX-512 kernel reads them. A tile's bytes stay
// where its rows were: row slices at multiples of 16 rows and experts' slices stay valid, and a
// matrix can be repacked in place, one tile at a time. The values and their sums are the file's:
// the kernels' results are bit for bit those of the row-major matrix.
//
// Q4_0x16, for the AVX-512 Q4_0 kernel (matmul_avx512.cpp; the AVX2 one reads each tile as two
// halves of 8 rows, the first and last 16 bytes of each scale column and 32-byte vectors). That kernel computes 16 output rows
// at once with one row per 32-bit lane: for each block column it wants the 16 rows' scales as one
// 16-lane vector and, for m = 0..3, the 16 rows' qs bytes 4m..4m+3 as one 64-byte vector. From the
// file's row-major blocks it gathers them with masked loads, byte permutes and a 128-bit
// transpose per block, which makes a one-token product compute-bound (docs/benchmarks.md). The
// repacked tile stores exactly those vectors:
//
//   tile t = bytes [16 t row_stride, 16 (t + 1) row_stride) of the matrix, nb = cols / 32 blocks:
//     scales  [nb][16] fp16           scale of block b of row r at  (b * 16 + r) * 2
//     qs      [nb][4][16][4] bytes    qs byte 4m + j of block b of row r at  nb * 32 + b * 256 + m * 64 + r * 4 + j
//
// so nb * 32 + nb * 256 = 16 * nb * 18 bytes, the tile's rows' bytes.
//
// Kx16, for the AVX-512 Q4_K, IQ4_XS and Q5_K kernels (matmul_kquant_avx512.cpp), whose
// super-blocks (144, 136 and 176 bytes) are whole dwords. Those kernels take a row per lane: per
// super-block column they transpose the 16 rows' headers (d, dmin and scales; d and scales) and
// their qs (and Q5_K's qh) bytes dword by dword (16 x 16 dword transposes, ~70 shuffles for 128
// bytes), so that vector j holds dword j of every row. The repacked tile stores those vectors,
// super-block column after column, so a column is read with whole-vector loads and no shuffle.
// (Q5_K's decoding product, one activation row, otherwise takes the file's rows one at a time in
// vec_dot's lanes; repacked it runs the same lanes 16 rows at a time.)
//
//   tile t as above, block size B (B / 4 dwords), nb = cols / 256 super-blocks:
//     dword j (bytes 4j .. 4j + 3) of super-block b of row r at  b * 16 * B + j * 64 + r * 4
#pragma once
#include <cstdint>

#include "kernels/matmul.h"

namespace clover::kernels {

constexpr int kTileRows = 16;  // rows of a Q4_0x16 or Kx16 tile

// The tile layout m can be repacked into: Q4_0x16 for Q4_0, Kx16 for Q4_K, IQ4_XS and Q5_K, when m is
// row-major with contiguous rows, a multiple of 16 of them; RowMajor when it cannot be.
Layout repack_layout(const MatRef& m);

// Whether isa's kernels read layout l as it is (the others unpack each tile to rows first: slower
// than the file's layout): every layout on AVX-512, Q4_0x16 on AVX2 (matmul_avx2.cpp), row-major
// on all.
bool layout_has_kernel(Layout l, Isa isa);

// repack_layout(m) where isa has a kernel for it, RowMajor elsewhere: what a load for that CPU
// rewrites m into.
Layout repack_layout(const MatRef& m, Isa isa);

// Writes m (repack_layout(m) != RowMajor) in its tile layout to dst, which holds rows * row_stride
// bytes and may be m.data itself (in place). Returns m with data = dst and the new layout.
MatRef repack(const MatRef& m, void* dst);

// The same for tiles [tile_begin, tile_end) only (rows 16 tile_begin ..), for callers that share
// the work out; the MatRef it would return is repack's.
void repack_tiles(const MatRef& m, void* dst, int64_t tile_begin, int64_t tile_end);

// Rows [row0, row0 + n) of m in the row-major layout, to dst (n * row_stride bytes), whatever m's
// layout: for readers that take rows (conversion, a GPU upload, the paths without a tile kernel).
void unpack_rows(const MatRef& m, int64_t row0, int64_t n, void* dst);

}  // namespace clover::kernels
