// The MoE layer's ops on the device, after routing (ops.h: record_moe_router): group the routed
// rows by expert, run each expert's products over its rows, swiglu, and combine. Nothing goes
// back to the host inside a layer: the groups live in a device buffer the expert products read.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/vulkan/ops.h"

namespace clover::vulkan {

// Consecutive experts stored back to back: experts [first, first + count) of the layer at stored
// slots [slot, slot + count).
struct ExpertRun {
  int64_t first = 0, count = 0, slot = 0;
};

// The experts of one expert tensor (e.g. ffn_gate_exps) the device holds, each a matrix of rows x
// cols: the stored slot s at byte offset + s * expert_stride, its row o at + o * row_stride. A
// layer whose other experts are in host RAM (backend/placement.h) stores only its own, in runs.
struct DeviceExperts {
  DType type = DType::F32;
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  int64_t n_expert = 0, rows = 0, cols = 0;  // n_expert: the layer's experts (the groups' layout)
  uint64_t row_stride = 0, expert_stride = 0;
  std::vector<ExpertRun> runs;  // the experts stored, in order
  int64_t n_stored() const;
};
// Uploads `n_expert` host matrices, but the experts `skip` marks (empty: none), back to back
// (each as upload_matrix).
DeviceExperts upload_experts(Device& dev, const kernels::MatRef* experts, int64_t n_expert, const Buffer& dst,
                             uint64_t offset, const std::vector<bool>& skip = {});
uint64_t device_experts_bytes(const kernels::MatRef& one_expert, int64_t n_expert);

// Ints of the groups buffer: count [n_expert] | first [n_expert] | token [tokens * k] | row_of [tokens * k] |
// n_active [1] | active [n_expert] (the experts with routed rows, ascending, then -1s).
inline int64_t moe_group_ints(int64_t n_expert, int64_t tokens, int64_t k) { return 3 * n_expert + 2 * tokens * k + 1; }
// Where n_active is: after the two per-row arrays of the pass's routed rows (tokens * k).
inline int64_t moe_group_active_offset(int64_t n_expert, int64_t routed_rows) { return 2 * n_expert + 2 * routed_rows; }

// moe_group.comp (twin: the grouping in model/moe.cpp): ids [tokens][k] -> groups.
void record_moe_group(CommandList& cl, Device& dev, BufferRange ids, int64_t tokens, int64_t n_expert, int64_t k,
                      BufferRange groups);
// record_moe_router then record_moe_group in one dispatch (moe_router.comp GROUP; bitwise the
// two): the last workgroup to route groups the pass. `done` is one word that must hold 0 before
// the dispatch (the dispatch leaves it 0 again).
void record_moe_route_and_group(CommandList& cl, Device& dev, BufferRange logits, int64_t tokens, int64_t n_expert,
                                int64_t k, int64_t stride, BufferRange ids, BufferRange weights, BufferRange groups,
                                BufferRange done);

// matmul.comp with EXPERTS (twin: kernels::matmul_selected per expert): for every expert e the
// device stores and each routed row r of e, y[r * y_stride + o] = W_e row o . activation row (gather ? token[r] : r).
// x and q8 as for record_matmul (q8 for block-quantised experts). routed_rows: the pass's tokens x k
// (the groups' layout); the grid has a workgroup row per routed expert at most (min(stored experts,
// routed_rows)), each taking the next expert of the groups' active list.
void record_matmul_experts(CommandList& cl, Device& dev, const DeviceExperts& w, BufferRange x, int64_t x_stride,
                           const Q8Activations* q8, BufferRange groups, int64_t routed_rows, bool gather, BufferRange y,
                           int64_t y_stride);
// The dispatches record_matmul_experts records for `w` (its runs' chunks of experts).
int64_t matmul_experts_dispatches(const Device& dev, const DeviceExperts& w);

// swiglu.comp (twin: kernels::swiglu_span_ref): g = silu(g) * u, rows of n, in place.
void record_swiglu(CommandList& cl, Device& dev, BufferRange g, BufferRange u, int64_t rows, int64_t n, int64_t stride);
// g = silu(g) * u over rows (record_swiglu), then g quantised into a, in one dispatch (bitwise
// the two): quantize_q8_0_activation.comp SWIGLU for Q8_0 and Q8_1, quantize_q8_k_activation.comp
// SWIGLU for Q8_K (cols a multiple of 256). g and u are `stride` floats between rows.
void record_swiglu_quantize(CommandList& cl, Device& dev, BufferRange g, BufferRange u, int64_t rows, int64_t cols,
                            int64_t stride, const Q8Activations& a);

// moe_combine.comp (twin: the last loop of model/moe.cpp): y [tokens][y_stride] from the routed
// down rows [rows][n], the shared expert's [tokens][n], the router weights and gamma [tokens].
void record_moe_combine(CommandList& cl, Device& dev, BufferRange down, BufferRange shared, BufferRange weights,
                        BufferRange groups, BufferRange gamma, int64_t gamma_stride, int64_t tokens, int64_t n_expert,
                        int64_t k, int64_t n, BufferRange y, int64_t y_stride);
// What record_moe_combine reads, for the fused form below.
struct MoeCombineInputs {
  BufferRange down, shared, weights, groups, gamma;
  int64_t gamma_stride = 1, n_expert = 0, k = 0;
};
// The MoE output added to the residual stream and the next norm, in one dispatch (rms_norm.comp
// ADD COMBINE; bitwise record_moe_combine into r, then record_add_rms_norm_quantize): x += the
// combined rows, y = rms_norm(x) * w, and y quantised into a when given (in the same dispatch
// where norm_quantizes, else a quantisation of its own). s: one head a row, n the model width.
void record_moe_combine_add_rms_norm(CommandList& cl, Device& dev, const MoeCombineInputs& c, const NormShape& s, float eps,
                                     BufferRange x, BufferRange w, BufferRange y, const Q8Activations* a);

}  // namespace clover::vulkan
