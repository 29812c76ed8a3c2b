// Argument checks and recording of the MoE shaders (moe_ops.h).
#include "backend/vulkan/moe_ops.h"

#include <algorithm>

#include "backend/vulkan/ops_internal.h"

namespace clover::vulkan {

using detail::groups;
using detail::MatmulPush;
using detail::u32;
using detail::QuantizePush;
using detail::NormCombinePush;

namespace {
struct GroupPush {
  uint32_t n_expert, k, tokens;
};
struct SwigluPush {
  uint32_t n, rows, stride;
};
struct CombinePush {
  uint32_t n, k, tokens, n_expert, gamma_stride, y_stride;
};
}  // namespace

uint64_t device_experts_bytes(const kernels::MatRef& one, int64_t n_expert) {
  return device_matrix_bytes(one) * static_cast<uint64_t>(n_expert);
}

int64_t DeviceExperts::n_stored() const {
  int64_t n = 0;
  for (const ExpertRun& r : runs) n += r.count;
  return n;
}

DeviceExperts upload_experts(Device& dev, const kernels::MatRef* experts, int64_t n_expert, const Buffer& dst,
                             uint64_t offset, const std::vector<bool>& skip) {
  if (n_expert < 1) throw VulkanError("upload_experts: no experts");
  if (!skip.empty() && static_cast<int64_t>(skip.size()) != n_expert)
    throw VulkanError(fmt::format("upload_experts: a mask of {} experts for {}", skip.size(), n_expert));
  const uint64_t each = device_matrix_bytes(experts[0]);
  if (each % 4) throw VulkanError("upload_experts: an expert's matrix is not a whole number of words");
  DeviceExperts d{experts[0].type, &dst, offset, n_expert, experts[0].rows, experts[0].cols, 0, each, {}};
  int64_t slot = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    if (experts[e].type != experts[0].type || experts[e].rows != experts[0].rows || experts[e].cols != experts[0].cols)
      throw VulkanError(fmt::format("upload_experts: expert {} differs in type or shape from expert 0", e));
    if (!skip.empty() && skip[e]) continue;
    const DeviceMatrix m = upload_matrix(dev, experts[e], dst, offset + slot * each);
    d.type = m.type, d.rows = m.rows, d.cols = m.cols, d.row_stride = m.row_stride;
    if (!d.runs.empty() && d.runs.back().first + d.runs.back().count == e)
      ++d.runs.back().count;
    else
      d.runs.push_back({e, 1, slot});
    ++slot;
  }
  if (slot == 0) throw VulkanError("upload_experts: every expert skipped (nothing to upload)");
  return d;
}

void record_moe_group(CommandList& cl, Device& dev, BufferRange ids, int64_t tokens, int64_t n_expert, int64_t k,
                      BufferRange groups_out) {
  if (tokens < 1 || n_expert < 1 || k < 1) throw VulkanError("moe_group: empty routing");
  if (n_expert > 512) throw VulkanError(fmt::format("moe_group: {} experts (the shader takes up to 512)", n_expert));
  const Pipeline& p = dev.pipelines().get("moe_group", 2, sizeof(GroupPush));
  const GroupPush push{u32(n_expert, "n_expert"), u32(k, "k"), u32(tokens, "tokens")};
  cl.dispatch(p, {ids, groups_out}, push, 1);
}

void record_moe_route_and_group(CommandList& cl, Device& dev, BufferRange logits, int64_t tokens, int64_t n_expert,
                                int64_t k, int64_t stride, BufferRange ids, BufferRange weights, BufferRange groups,
                                BufferRange done) {
  if (n_expert < 1 || n_expert > 512 || k < 1 || k > 16 || k > n_expert || tokens < 1)
    throw VulkanError(fmt::format("moe_route_and_group: {} tokens, {} experts, top-{} (the shader takes up to 512 experts, "
                                  "k <= 16)", tokens, n_expert, k));
  if (done.size() < 4) throw VulkanError("moe_route_and_group: no word for the count of routed tokens");
  struct Push {
    uint32_t n_expert, k, stride, tokens;
  };
  const Pipeline& p = dev.pipelines().get("moe_router_group", 5, sizeof(Push));
  const Push push{u32(n_expert, "n_expert"), u32(k, "k"), u32(stride, "stride"), u32(tokens, "tokens")};
  cl.dispatch(p, {logits, ids, weights, groups, done}, push, detail::groups(tokens, 1, "moe_route_and_group"));
}

int64_t matmul_experts_dispatches(const Device& dev, const DeviceExperts& w) {
  const int64_t chunk = detail::units_per_dispatch(dev, w.expert_stride, "matmul_experts (one expert's matrix)");
  int64_t n = 0;
  for (const ExpertRun& r : w.runs) n += (r.count + chunk - 1) / chunk;
  return n;
}

void record_matmul_experts(CommandList& cl, Device& dev, const DeviceExperts& w, BufferRange x, int64_t x_stride,
                           const Q8Activations* q8, BufferRange groups_in, int64_t routed_rows, bool gather, BufferRange y,
                           int64_t y_stride) {
  if (routed_rows < 1) throw VulkanError("matmul_experts: no routed rows");
  const bool quant = reads_q8_activations(w.type);
  if (quant && (!q8 || q8->cols != w.cols || q8->kind != activation_kind(w.type)))
    throw VulkanError(fmt::format("matmul_experts: {} experts of {} columns need {} activations of {} columns",
                                  dtype_name(w.type), w.cols, q8_kind_name(activation_kind(w.type)), w.cols));
  if (w.rows < 1 || w.rows > detail::kMaxGroups) throw VulkanError(fmt::format("matmul_experts: {} rows per expert", w.rows));
  const Pipeline& p = dev.pipelines().get(detail::matmul_shader(w.type, true), 5, sizeof(MatmulPush));
  // Experts per dispatch: as many whole matrices of one run as fit one binding. The shader's
  // expert is e0 + the workgroup's y; its matrix is at the chunk's start + y * expert_stride.
  const int64_t chunk = detail::units_per_dispatch(dev, w.expert_stride, "matmul_experts (one expert's matrix)");
  const BufferRange act = quant ? whole(q8->quants) : x;
  const BufferRange scales = quant ? whole(q8->scales) : x;
  const uint32_t lanes = detail::matmul_lanes(w.cols, quant);
  for (const ExpertRun& r : w.runs)
    for (int64_t i0 = 0; i0 < r.count; i0 += chunk) {
      const int64_t ne = std::min(chunk, r.count - i0);
      const detail::WeightChunk c = detail::weight_chunk(
          dev, *w.buffer, w.offset + static_cast<uint64_t>(r.slot + i0) * w.expert_stride, ne * w.expert_stride);
      const MatmulPush push{u32(w.rows, "rows"), u32(w.cols, "cols"), 0, c.lead, u32(w.row_stride, "w_stride"),
                            u32(x_stride, "x_stride"), u32(y_stride, "y_stride"), 0, u32(r.first + i0, "e0"),
                            u32(w.n_expert, "n_expert"), u32(w.expert_stride, "expert_stride"), gather ? 1u : 0u,
                            u32(ne, "n_chunk"), u32(moe_group_active_offset(w.n_expert, routed_rows), "active_off"),
                            lanes};
      // At most routed_rows experts have rows: a decode step's 8 of 256 launch 8 workgroup rows, not 256.
      const int64_t gy = std::min(ne, routed_rows);
      cl.dispatch(p, {c.range, act, scales, y, groups_in}, push, detail::matmul_row_groups(w.rows, lanes),
                  static_cast<uint32_t>(gy));
    }
}

void record_swiglu(CommandList& cl, Device& dev, BufferRange g, BufferRange u, int64_t rows, int64_t n, int64_t stride) {
  if (rows < 1 || n < 1 || stride < n) throw VulkanError("swiglu: bad shape");
  const Pipeline& p = dev.pipelines().get("swiglu", 2, sizeof(SwigluPush));
  const SwigluPush push{u32(n, "n"), u32(rows, "rows"), u32(stride, "stride")};
  cl.dispatch(p, {g, u}, push, groups(rows * n, 64, "swiglu"));
}

void record_swiglu_quantize(CommandList& cl, Device& dev, BufferRange g, BufferRange u, int64_t rows, int64_t cols,
                            int64_t stride, const Q8Activations& a) {
  if (cols % (a.kind == Q8Kind::Q8_K ? 256 : 32) || cols != a.cols || rows > a.rows || stride < cols)
    throw VulkanError(fmt::format("swiglu_quantize: {} x {} rows (stride {}) into {} scratch of {} x {}", rows, cols, stride,
                                  q8_kind_name(a.kind), a.rows, a.cols));
  const QuantizePush push{u32(cols, "cols"), u32(rows, "rows"), u32(stride, "x_stride")};
  const Pipeline& p = dev.pipelines().get(detail::quantize_variant("swiglu_quantize", a.kind), 4, sizeof(QuantizePush));
  if (a.kind == Q8Kind::Q8_K)  // a workgroup per super-block (quantize_q8_k_activation.comp SWIGLU)
    cl.dispatch(p, {g, whole(a.quants), whole(a.scales), u}, push, groups(cols / 256, 1, "swiglu_quantize (super-blocks)"),
                groups(rows, 1, "swiglu_quantize (rows)"));
  else
    cl.dispatch(p, {g, whole(a.quants), whole(a.scales), u}, push, groups(rows * (cols / 32), 64, "swiglu_quantize"));
}

void record_moe_combine(CommandList& cl, Device& dev, BufferRange down, BufferRange shared, BufferRange weights,
                        BufferRange groups_in, BufferRange gamma, int64_t gamma_stride, int64_t tokens, int64_t n_expert,
                        int64_t k, int64_t n, BufferRange y, int64_t y_stride) {
  if (tokens < 1 || k < 1 || n < 1) throw VulkanError("moe_combine: empty shape");
  const Pipeline& p = dev.pipelines().get("moe_combine", 6, sizeof(CombinePush));
  const CombinePush push{u32(n, "n"), u32(k, "k"), u32(tokens, "tokens"), u32(n_expert, "n_expert"),
                         u32(gamma_stride, "gamma_stride"), u32(y_stride, "y_stride")};
  cl.dispatch(p, {down, shared, weights, groups_in, gamma, y}, push, groups(tokens * n, 64, "moe_combine"));
}

void record_moe_combine_add_rms_norm(CommandList& cl, Device& dev, const MoeCombineInputs& c, const NormShape& s, float eps,
                                     BufferRange x, BufferRange w, BufferRange y, const Q8Activations* a) {
  if (s.n < 1 || s.tokens < 1 || s.heads != 1 || c.k < 1)
    throw VulkanError("moe_combine_add_rms_norm: empty shape or more than one head a row");
  const bool quant = a && norm_quantizes(s.n, *a);
  if (quant && (s.n != a->cols || s.tokens > a->rows))
    throw VulkanError(fmt::format("moe_combine_add_rms_norm: {} rows of {} into {} scratch of {} x {}", s.tokens, s.n,
                                  q8_kind_name(a->kind), a->rows, a->cols));
  const NormCombinePush push{detail::norm_push(s, NormMode::Weighted, eps, 1.0f), u32(c.k, "k"), u32(s.tokens, "tokens"),
                             u32(c.n_expert, "n_expert"), u32(c.gamma_stride, "gamma_stride")};
  const uint32_t gx = groups(s.tokens, 1, "moe_combine_add_rms_norm");
  if (!quant) {
    const Pipeline& p = dev.pipelines().get("rms_norm_add_combine", 8, sizeof(NormCombinePush));
    cl.dispatch(p, {x, w, c.down, y, c.shared, c.weights, c.groups, c.gamma}, push, gx);
    if (a) record_quantize(cl, dev, y, s.tokens, s.n, s.y_row, *a);
    return;
  }
  const Pipeline& p = dev.pipelines().get(detail::quantize_variant("rms_norm_add_combine", a->kind), 10, sizeof(NormCombinePush));
  cl.dispatch(p, {x, w, c.down, y, c.shared, c.weights, c.groups, c.gamma, whole(a->quants), whole(a->scales)}, push, gx);
}

}  // namespace clover::vulkan
