// Activation conversion, the scalar reference matmul, and run-time choice of the SIMD path.
#include "kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/convert.h"
#include "kernels/kquant.h"
#include "kernels/legacy_quant.h"
#include "kernels/matmul_internal.h"
#include "kernels/repack.h"
#include "kernels/vecmath_internal.h"  // reduce16

namespace clover::kernels {

using detail::MatmulCall;

DType activation_type(DType weight_type) {
  switch (weight_type) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::IQ4_NL:
    case DType::Q8_0:
      return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q8_1:
      return DType::Q8_1;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
      return DType::Q8_K;
    default:
      return weight_type;
  }
}

void ActRows::convert(const float* x, int64_t n_rows, int64_t cols, int64_t x_stride, DType type) {
  if (type != activation_type(type)) throw std::invalid_argument("ActRows: not an activation type");
  if (cols % dtype_block_size(type) != 0) throw std::invalid_argument("ActRows: cols not a multiple of the block");
  type_ = type;
  rows_ = n_rows;
  cols_ = cols;
  row_bytes_ = dtype_row_bytes(type, cols);
  const size_t need = static_cast<size_t>(n_rows) * row_bytes_;
  if (buf_.size() < need) buf_.resize(need);
  if (type == DType::Q8_0) {
    const size_t blocks = static_cast<size_t>(n_rows) * (cols / kQK);
    if (q4_bias_.size() < blocks) q4_bias_.resize(blocks), scales_.resize(blocks);
  }

  const bool simd = isa_active() == Isa::Avx512;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* src = x + r * x_stride;
    uint8_t* dst = buf_.data() + static_cast<size_t>(r) * row_bytes_;
    if (type == DType::Q8_K) {
      if (simd)
        detail::convert_q8_k_avx512(src, cols, reinterpret_cast<BlockQ8_K*>(dst));
      else
        quantize_row_q8_k_activation(src, reinterpret_cast<BlockQ8_K*>(dst), cols);
    } else if (type == DType::Q8_1) {
      quantize_row_q8_1_activation(src, reinterpret_cast<BlockQ8_1*>(dst), cols);
    } else if (type == DType::Q8_0) {
      auto* blocks = reinterpret_cast<BlockQ8_0*>(dst);
      if (simd)
        detail::convert_q8_0_avx512(src, cols, blocks);
      else
        quantize_row_q8_0_activation(src, blocks, cols);
      const int64_t nb = cols / kQK;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t sum = 0;
        for (int k = 0; k < kQK; ++k) sum += blocks[b].qs[k];
        q4_bias_[r * nb + b] = -8 * sum;
        scales_[r * nb + b] = fp16_to_fp32(blocks[b].d);
      }
    } else if (type == DType::F16 && isa_active() != Isa::Scalar) {
      detail::convert_f16_f16c(src, cols, reinterpret_cast<uint16_t*>(dst));
    } else if (type == DType::BF16 && isa_active() != Isa::Scalar) {
      detail::convert_bf16_avx2(src, cols, reinterpret_cast<uint16_t*>(dst));
    } else {
      quantize_row(type, src, dst, cols);  // F32 copy, F16 / BF16 round to nearest even
    }
  }
}

// ---- ggml_vec_dot_f32's order, the scalar twin (matmul_internal.h) --------------------------

namespace detail {

float vec_dot_f32_ref(const float* x, const float* y, int64_t n) {
  constexpr int kLanes = 16;
  const int64_t np = n / 64 * 64;
  float acc[4][kLanes] = {};
  for (int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < kLanes; ++l) acc[j][l] = std::fma(x[i + kLanes * j + l], y[i + kLanes * j + l], acc[j][l]);
  float b[kLanes];
  for (int l = 0; l < kLanes; ++l) b[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  return dot_tail(x, y, np, n, reduce16(b));
}

namespace {
inline int block_value(const BlockQ8_0& b, int k) { return b.qs[k]; }
inline int block_value(const BlockQ4_0& b, int k) { return q4_0_value(b, k); }

template <class Block>
float dot_lanes8_ref(const Block* w, const BlockQ8_0* a, int64_t nb) {
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d);
    for (int l = 0; l < 8; ++l) {
      int32_t sum = 0;
      for (int k = 4 * l; k < 4 * l + 4; ++k) sum += block_value(w[b], k) * a[b].qs[k];
      acc[l] = std::fma(d, static_cast<float>(sum), acc[l]);
    }
  }
  return hsum8_ref(acc);
}
}  // namespace

float q8_0_dot_lanes8_ref(const BlockQ8_0* w, const BlockQ8_0* a, int64_t nb) { return dot_lanes8_ref(w, a, nb); }
float q4_0_dot_lanes8_ref(const BlockQ4_0* w, const BlockQ8_0* a, int64_t nb) { return dot_lanes8_ref(w, a, nb); }

float q4_0_dot_blocks_ref(const BlockQ4_0* w, const BlockQ8_0* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (int k = 0; k < kQK; ++k) sum += q4_0_value(w[b], k) * a[b].qs[k];
    acc = std::fma(static_cast<float>(sum), fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d), acc);
  }
  return acc;
}

}  // namespace detail

// ---- scalar reference ----------------------------------------------------------------------

namespace {

float dot_ref(DType t, const void* wrow, const void* arow, int64_t cols) {
  float acc = 0.0f;
  switch (t) {
    case DType::F32: {
      const auto* w = static_cast<const float*>(wrow);
      const auto* a = static_cast<const float*>(arow);
      for (int64_t k = 0; k < cols; ++k) acc += w[k] * a[k];
      break;
    }
    case DType::F16: {
      const auto* w = static_cast<const uint16_t*>(wrow);
      const auto* a = static_cast<const uint16_t*>(arow);
      for (int64_t k = 0; k < cols; ++k) acc += fp16_to_fp32(w[k]) * fp16_to_fp32(a[k]);
      break;
    }
    case DType::BF16: {
      const auto* w = static_cast<const uint16_t*>(wrow);
      const auto* a = static_cast<const uint16_t*>(arow);
      for (int64_t k = 0; k < cols; ++k) acc += bf16_to_fp32(w[k]) * bf16_to_fp32(a[k]);
      break;
    }
    case DType::Q4_0: {
      const auto* w = static_cast<const BlockQ4_0*>(wrow);
      const auto* a = static_cast<const BlockQ8_0*>(arow);
      for (int64_t b = 0; b < cols / kQK; ++b) {
        int32_t sumi = 0;
        for (int j = 0; j < kQK / 2; ++j) {
          sumi += ((w[b].qs[j] & 0x0f) - 8) * a[b].qs[j];
          sumi += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + kQK / 2];
        }
        acc += static_cast<float>(sumi) * (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d));
      }
      break;
    }
    case DType::Q8_0: {
      const auto* w = static_cast<const BlockQ8_0*>(wrow);
      const auto* a = static_cast<const BlockQ8_0*>(arow);
      for (int64_t b = 0; b < cols / kQK; ++b) {
        int32_t sumi = 0;
        for (int j = 0; j < kQK; ++j) sumi += w[b].qs[j] * a[b].qs[j];
        acc += static_cast<float>(sumi) * (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d));
      }
      break;
    }
    default:
      break;
  }
  return acc;
}

void matmul_scalar(const MatmulCall& c) {
  if (dtype_is_kquant(c.w->type)) return detail::matmul_kquant_ref(c);
  if (dtype_is_legacy_extra(c.w->type)) return detail::matmul_legacy_ref(c);
  const auto* wbase = static_cast<const uint8_t*>(c.w->data);
  for (int64_t i = 0; i < c.n; ++i) {
    const void* arow = c.acts->row(c.act_index(i));
    for (int64_t o = c.o_begin; o < c.o_end; ++o) {
      c.y[i * c.ldy + o] = dot_ref(c.w->type, wbase + static_cast<size_t>(o) * c.w->row_stride, arow, c.w->cols);
    }
  }
}

void check_call(const MatRef& w, const ActRows& acts, int64_t o_begin, int64_t o_end) {
  if (w.layout != Layout::RowMajor) {
    MatRef rows = w;
    rows.layout = Layout::RowMajor;
    if (repack_layout(rows) != w.layout)
      throw std::invalid_argument(
          w.layout == Layout::Q4_0x16
              ? "matmul: a Q4_0x16 matrix must be Q4_0 in whole 16-row tiles of whole blocks, rows contiguous"
              : "matmul: a Kx16 matrix must be Q4_K, IQ4_XS or Q5_K in whole 16-row tiles of whole super-blocks, rows contiguous");
  }
  if (acts.type() != activation_type(w.type)) throw std::invalid_argument("matmul: activation type mismatch");
  if (acts.cols() != w.cols) throw std::invalid_argument("matmul: activation cols != weight cols");
  if (o_begin < 0 || o_end > w.rows || o_begin > o_end) throw std::invalid_argument("matmul: bad output row range");
}

// A repacked matrix on a path without a kernel for its layout: each 16-row tile in the call's
// range unpacked to row-major rows, then the path's row-major kernel on them. (A 16-row matrix
// takes the same summation order as any matrix of 16-row tiles of its type, and the call keeps
// its order: the results are the same.)
void run_unpacked(const MatmulCall& c, void (*kernel)(const MatmulCall&)) {
  thread_local std::vector<uint8_t> rows;
  rows.resize(kTileRows * c.w->row_stride);
  for (int64_t t0 = c.o_begin / kTileRows * kTileRows; t0 < c.o_end; t0 += kTileRows) {
    unpack_rows(*c.w, t0, kTileRows, rows.data());
    MatRef tile = *c.w;
    tile.data = rows.data(), tile.rows = kTileRows, tile.layout = Layout::RowMajor;
    MatmulCall cc = c;
    cc.w = &tile;
    cc.y = c.y + t0;
    cc.o_begin = std::max(c.o_begin, t0) - t0;
    cc.o_end = std::min(c.o_end, t0 + kTileRows) - t0;
    kernel(cc);
  }
}

void run(const MatmulCall& c) {
  const Isa isa = isa_active();
  if (c.w->layout != Layout::RowMajor && !layout_has_kernel(c.w->layout, isa))
    return run_unpacked(c, isa == Isa::Avx2 ? detail::matmul_avx2 : matmul_scalar);
  switch (isa) {
    case Isa::Avx512: detail::matmul_avx512(c); break;
    case Isa::Avx2: detail::matmul_avx2(c); break;
    case Isa::Scalar: matmul_scalar(c); break;
  }
}

}  // namespace

// ---- entry points --------------------------------------------------------------------------

SumOrder sum_order(DType weight_type, int64_t rows, int64_t cols) {
  // llama.cpp's quantised tinyBLAS (tinyBLAS_Q0_AVX) takes every shape. Of its types only IQ4_NL
  // sums differently from vec_dot (one set of lanes against vec_dot's pairs of blocks), on
  // matrices that are not repacked (rows % 8 != 0; matmul_legacy.cpp).
  if (weight_type == DType::IQ4_NL) return SumOrder::Gemm;
  const int64_t step = weight_type == DType::BF16 ? 32 : 16;
  return rows % 4 == 0 && cols % step == 0 ? SumOrder::Gemm : SumOrder::VecDot;
}

void matmul(const MatRef& w, const ActRows& acts, float* y, int64_t ldy, int64_t o_begin, int64_t o_end, SumOrder order,
            const void* then) {
  check_call(w, acts, o_begin, o_end);
  run(MatmulCall{&w, &acts, nullptr, acts.rows(), y, ldy, o_begin, o_end, order, then});
}

void matmul_selected(const MatRef& w, const ActRows& acts, const int32_t* sel, int64_t n_sel, float* y,
                     int64_t ldy, int64_t o_begin, int64_t o_end, SumOrder order, const void* then) {
  check_call(w, acts, o_begin, o_end);
  run(MatmulCall{&w, &acts, sel, n_sel, y, ldy, o_begin, o_end, order, then});
}

void matmul_ref(const MatRef& w, const ActRows& acts, float* y, int64_t ldy, int64_t o_begin, int64_t o_end) {
  check_call(w, acts, o_begin, o_end);
  const MatmulCall c{&w, &acts, nullptr, acts.rows(), y, ldy, o_begin, o_end};
  if (w.layout != Layout::RowMajor) return run_unpacked(c, matmul_scalar);
  matmul_scalar(c);
}

}  // namespace clover::kernels
