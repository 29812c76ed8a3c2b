// Matrix-vector and small matrix-matrix products of weight rows with activation rows.
//
// Numerics follow ggml-cpu so that logits can be compared with llama.cpp: before the dot product,
// activations are converted to the weight type's "activation type" (Q8_0 blocks of 32 with an fp16
// scale and round-half-to-even for Q4_0/Q8_0 weights, F16 for F16, BF16 for BF16, F32 for F32),
// and on the AVX-512 path the products are summed in llama.cpp's orders (SumOrder below; the
// quantised orders in matmul_internal.h), so its logits come out bit for bit (docs/oracle.md).
//
// Every optimised path has a scalar reference twin (matmul_ref) and is batch-invariant: an output
// element is computed with the same operations in the same order whatever the number of activation
// rows in the call and whatever range of output rows a thread is given.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/dtype.h"

namespace clover::kernels {

// How a matrix's bytes are arranged. RowMajor: row o at data + o * row_stride, as in the file.
// Q4_0x16 (Q4_0) and Kx16 (Q4_K, IQ4_XS, Q5_K): rows repacked for the type's AVX-512 kernel in
// tiles of 16 rows, each tile in the bytes its rows held (kernels/repack.h); every path reads them
// (the others by unpacking a tile).
enum class Layout : uint8_t { RowMajor, Q4_0x16, Kx16 };

// A weight matrix: `rows` output rows of `cols` values of `type`, consecutive rows `row_stride`
// bytes apart (in `layout`). y = W x computes one output per row.
struct MatRef {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;
  Layout layout = Layout::RowMajor;
};

// The type activations are converted to before a dot product with weights of type t.
DType activation_type(DType weight_type);

// Activation rows converted to an activation type. Reuses its storage across calls, so a warm
// buffer allocates nothing.
class ActRows {
 public:
  // Converts n_rows rows of `cols` floats (row r at x + r * x_stride).
  void convert(const float* x, int64_t n_rows, int64_t cols, int64_t x_stride, DType type);
  DType type() const { return type_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const void* row(int64_t r) const { return buf_.data() + static_cast<size_t>(r) * row_bytes_; }
  // Q8_0 rows: per block, -8 x the sum of its 32 values (the Q4_0 kernels' nibble bias) and its
  // scale as a float; computed once per conversion, for every matmul that reads the rows.
  const int32_t* q4_bias(int64_t r) const { return q4_bias_.data() + r * blocks_per_row(); }
  const float* scales(int64_t r) const { return scales_.data() + r * blocks_per_row(); }

 private:
  int64_t blocks_per_row() const { return cols_ / 32; }
  DType type_ = DType::F32;
  int64_t rows_ = 0, cols_ = 0;
  size_t row_bytes_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<int32_t> q4_bias_;
  std::vector<float> scales_;
};

// The summation order of a product, as llama.cpp's CPU backend (AVX-512 build) would sum it:
// Gemm is its dense matrix product (tinyBLAS: one 16-lane accumulator per output for F32/F16, one
// vdpbf16ps accumulator for BF16); VecDot is the type's row dot product (F32: 4 x 16 lanes per 64
// values and a tail in groups of 8; F16: the same lanes, the tail in double; BF16: 2 vdpbf16ps
// accumulators per 64, sums and tail in double). llama.cpp uses VecDot for MoE expert products
// (MUL_MAT_ID) and for dense products that tinyBLAS declines (sum_order below). The orders
// differ for float weights only, and only the AVX-512 path follows VecDot (the AVX2 and scalar
// paths have one order each).
enum class SumOrder { Gemm, VecDot };

// The order llama.cpp gives a dense prompt product of `rows` x `cols` weights: tinyBLAS takes it
// when rows are a multiple of 4 and cols a multiple of its step (32 values for BF16, 16
// otherwise). (llama.cpp also uses VecDot for single-token products; the engine does not follow
// that, so that a position's result never depends on how many positions a pass holds, which
// speculative decoding relies on.)
SumOrder sum_order(DType weight_type, int64_t rows, int64_t cols);

// y[r * ldy + o] = dot(W row o, acts row r), for o in [o_begin, o_end) and every activation row r.
// acts.type() must be activation_type(w.type) and acts.cols() == w.cols.
//
// then: where the calling thread reads weights next, when that is not the rows after o_end (the
// first row of its next product: another expert's matrix, the next projection). The kernels that
// prefetch ahead of the tile they compute (x86, for decoding) prefetch there during their last
// tile instead of past o_end, so the next product starts warm. Speed only: results do not depend
// on it. Null: the rows after o_end.
void matmul(const MatRef& w, const ActRows& acts, float* y, int64_t ldy, int64_t o_begin, int64_t o_end,
            SumOrder order = SumOrder::Gemm, const void* then = nullptr);

// As matmul, for the activation rows listed in `sel` only: y[i * ldy + o] uses acts row sel[i].
// (MoE: the tokens routed to one expert.)
void matmul_selected(const MatRef& w, const ActRows& acts, const int32_t* sel, int64_t n_sel, float* y,
                     int64_t ldy, int64_t o_begin, int64_t o_end, SumOrder order = SumOrder::Gemm,
                     const void* then = nullptr);

// The first byte of row o of w (what `then` names for a product that starts at row o; a repacked
// matrix's 16-row tile starts at its first row's offset too).
inline const void* row_address(const MatRef& w, int64_t o) {
  return static_cast<const uint8_t*>(w.data) + static_cast<size_t>(o) * w.row_stride;
}

// Scalar reference twin of matmul (same rounding of activations; plain loops).
void matmul_ref(const MatRef& w, const ActRows& acts, float* y, int64_t ldy, int64_t o_begin, int64_t o_end);

}  // namespace clover::kernels
