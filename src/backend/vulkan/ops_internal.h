// Helpers shared by the op recorders (ops.cpp, moe_ops.cpp).
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/vulkan/device.h"
#include "backend/vulkan/ops.h"
#include "kernels/dtype.h"

namespace clover::vulkan::detail {

constexpr uint32_t kMaxGroups = 65535;  // the smallest maxComputeWorkGroupCount Vulkan allows

inline uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > 0xffffffffll) throw VulkanError(fmt::format("{} = {} does not fit the shader's 32-bit index", what, v));
  return static_cast<uint32_t>(v);
}

// Workgroups for `items` items at `per_group` each; throws past the grid limit.
inline uint32_t groups(int64_t items, int64_t per_group, const char* op) {
  const int64_t g = (items + per_group - 1) / per_group;
  if (g < 1 || g > kMaxGroups) throw VulkanError(fmt::format("{}: {} workgroups (1..{} allowed)", op, g, kMaxGroups));
  return static_cast<uint32_t>(g);
}

// Binding offsets are multiples of this (and of a word).
inline uint64_t weight_alignment(const Device& dev) { return dev.offset_alignment(); }

// How many units (weight rows, or whole expert matrices) of `unit_bytes` one dispatch binds: as
// many as fit one binding after up to an alignment of lead-in, and the grid. Throws when not one fits.
inline int64_t units_per_dispatch(const Device& dev, uint64_t unit_bytes, const char* op) {
  const uint64_t align = weight_alignment(dev), limit = dev.binding_limit();
  if (unit_bytes + align > limit)
    throw VulkanError(fmt::format("{}: one unit of {} bytes exceeds the binding limit ({})", op, unit_bytes, limit));
  return std::min<int64_t>(kMaxGroups, static_cast<int64_t>((limit - align) / unit_bytes));
}

// The matmul shader of a weight type, dense or over expert groups.
inline std::string matmul_shader(DType t, bool experts) {
  const char* base = nullptr;
  switch (t) {
    case DType::F32: base = "matmul_f32"; break;
    case DType::F16: base = "matmul_f16"; break;
    case DType::BF16: base = "matmul_bf16"; break;
    case DType::Q8_0: base = "matmul_q8_0"; break;
    case DType::Q4_0: base = "matmul_q4_0"; break;
    case DType::Q4_1: base = "matmul_q4_1"; break;
    case DType::Q5_0: base = "matmul_q5_0"; break;
    case DType::Q5_1: base = "matmul_q5_1"; break;
    case DType::IQ4_NL: base = "matmul_iq4_nl"; break;
    case DType::Q2_K: base = "matmul_q2_k"; break;
    case DType::Q3_K: base = "matmul_q3_k"; break;
    case DType::Q4_K: base = "matmul_q4_k"; break;
    case DType::Q5_K: base = "matmul_q5_k"; break;
    case DType::Q6_K: base = "matmul_q6_k"; break;
    case DType::IQ4_XS: base = "matmul_iq4_xs"; break;
    default: throw VulkanError(fmt::format("matmul: no shader for {} weights", dtype_name(t)));
  }
  return experts ? std::string(base) + "_experts" : std::string(base);
}

// Invocations per output row of matmul.comp (its push `lanes`): one per block of 32 of a row
// (quantised) or per value (float weights), as a power of two, at most 64. A workgroup of 256
// holds 256 / lanes rows, so short rows (the experts' down products: 512 columns, 16 blocks) fill
// their workgroups instead of leaving 48 of 64 invocations idle. The sums are bitwise those of 64
// lanes: a lane holds at most one unit of a row of up to 64 either way, and the wider tree only
// adds the idle lanes' exact zeros. It depends on the row length only (batch invariance).
constexpr uint32_t kMatmulInvocations = 256;
// Activation rows per workgroup of a dense product (matmul.comp ACT_ROWS_PER_GROUP): four tiles of
// 8, over which quantised rows of up to 64 blocks are read and decoded once (a 32-position block
// pass reads each dense weight once, not four times).
constexpr int64_t kMatmulActRows = 32;
inline uint32_t matmul_lanes(int64_t cols, bool quantised) {
  const int64_t units = quantised ? cols / 32 : cols;
  uint32_t lanes = 1;
  while (lanes < 64 && lanes < units) lanes <<= 1;
  return lanes;
}
inline uint32_t matmul_row_groups(int64_t rows, uint32_t lanes) {
  const int64_t per = kMatmulInvocations / lanes;
  return static_cast<uint32_t>((rows + per - 1) / per);
}

// rms_norm.comp's push constants (the COMBINE variants append NormCombinePush's fields).
struct NormPush {
  uint32_t n, heads, x_row, x_head, y_row, y_head;
  float eps, post;
  uint32_t mode;
};
struct NormCombinePush {
  NormPush norm;
  uint32_t k, tokens, n_expert, gamma_stride;
};
NormPush norm_push(const NormShape& s, NormMode mode, float eps, float post);
// The variant of a quantising shader `base` ("rms_norm", "rms_norm_add", "rms_norm_add_combine",
// "swiglu_quantize", "sigmoid_gate_quantize") that writes `kind`: "<base>_q8_0", "_q8_1" or "_q8_k".
std::string quantize_variant(const char* base, Q8Kind kind);

// quantize_q8_0_activation.comp's and quantize_q8_k_activation.comp's push constants.
struct QuantizePush {
  uint32_t cols, n_rows, x_stride;
};

// matmul.comp's push constants (e0 .. active_off are read by the expert variants only).
struct MatmulPush {
  uint32_t rows, cols, n_act, w_base, w_stride, x_stride, y_stride, o0;
  uint32_t e0, n_expert, expert_stride, gather;
  uint32_t n_chunk, active_off;  // EXPERTS: experts of the dispatch's chunk; where the active list is
  uint32_t lanes;                // matmul_lanes
};

// A range of weights bound for one dispatch: the binding starts at the device's offset alignment
// at or below `start`; the shader skips `lead` bytes to reach it. `bytes` from `start`, clipped
// to the buffer, rounded up to a word.
struct WeightChunk {
  BufferRange range;
  uint32_t lead = 0;
};
inline WeightChunk weight_chunk(const Device& dev, const Buffer& buf, uint64_t start, uint64_t bytes) {
  const uint64_t align = weight_alignment(dev);
  const uint64_t aligned = start / align * align;
  const uint64_t span = std::min<uint64_t>((start - aligned + bytes + 3) & ~uint64_t{3}, buf.size() - aligned);
  return {BufferRange{&buf, aligned, span}, static_cast<uint32_t>(start - aligned)};
}

}  // namespace clover::vulkan::detail
