// Weight layouts other than the file's row-major one (MatRef::layout).
//
// Q4_0x16, for the AVX-512 Q4_0 kernel (matmul_avx512.cpp). That kernel computes 16 output rows
// at once with one row per 32-bit lane: for each block column it wants the 16 rows' scales as one
// 16-lane vector and, for m = 0..3, the 16 rows' qs bytes 4m..4m+3 as one 64-byte vector. From the
// file's row-major blocks it gathers them with masked loads, byte permutes and a 128-bit
// transpose per block, which makes a one-token product compute-bound (docs/benchmarks.md). The
// repacked tile stores exactly those vectors, in the same bytes its 16 rows occupied:
//
//   tile t = bytes [16 t row_stride, 16 (t + 1) row_stride) of the matrix, nb = cols / 32 blocks:
//     scales  [nb][16] fp16           scale of block b of row r at  (b * 16 + r) * 2
//     qs      [nb][4][16][4] bytes    qs byte 4m + j of block b of row r at  nb * 32 + b * 256 + m * 64 + r * 4 + j
//
// so nb * 32 + nb * 256 = 16 * nb * 18 bytes, the tile's rows' bytes. A tile's bytes stay where
// its rows were: row slices at multiples of 16 rows and experts' slices stay valid, and a matrix
// can be repacked in place, one tile at a time. The values and their sums are the file's: the
// kernel's results are bit for bit those of the row-major matrix.
#pragma once
#include <cstdint>

#include "kernels/matmul.h"

namespace clover::kernels {

constexpr int kQ4Tile = 16;  // rows of a Q4_0x16 tile

// Whether m can be repacked to Q4_0x16: row-major Q4_0, rows a multiple of 16, rows contiguous.
bool q4_0_repackable(const MatRef& m);

// Writes m (row-major, q4_0_repackable) as Q4_0x16 to dst, which holds rows * row_stride bytes and
// may be m.data itself (in place). Returns m with data = dst and layout = Q4_0x16.
MatRef repack_q4_0_x16(const MatRef& m, void* dst);

// The same for tiles [tile_begin, tile_end) only (rows 16 tile_begin ..), for callers that share
// the work out; the MatRef it would return is repack_q4_0_x16's.
void repack_q4_0_x16_tiles(const MatRef& m, void* dst, int64_t tile_begin, int64_t tile_end);

// Rows [row0, row0 + n) of m in the row-major layout, to dst (n * row_stride bytes), whatever m's
// layout: for readers that take rows (conversion, a GPU upload, the paths without a tile kernel).
void unpack_rows(const MatRef& m, int64_t row0, int64_t n, void* dst);

}  // namespace clover::kernels
