// The Vulkan backend: the Clover forward pass on a GPU (or on lavapipe in CI), behind the same
// boundary as the CPU backend (backend/executor.h).
//
// A pass is one command list: every op of every layer recorded as a dispatch (shaders/), with no
// host round trip inside the pass; the host's part is looking up the tokens' embedding rows and
// the rope angles before it, and reading the logits rows (and the routing ids, for the pass's
// statistics) after it. Several sequences' passes stack into one: everything per row (norms,
// projections, the MoE, the head) runs once over all rows; attention and the GDN recurrence run
// per sequence on its own device state. Each shader computes a row from that row alone, so a
// row's result does not depend on its neighbours (batch invariance, as on the CPU).
//
//   x = embed(tokens)                                  host lookup, uploaded
//   per layer:  h = rms(x);  x += mixer(h)             gdn: qkv/z/beta/alpha, conv+silu, l2, delta rule, gated norm, out
//                                                      attention: q|gate, k, v, norms, rope, kv store, attention, gate, o
//               h = rms(x);  x += moe(h)               router, top-k, grouping, expert products, shared expert, combine
//   logits = head(rms(x)) for the rows asked for      in chunks of rows that fit the logits scratch
//
// The lists of a pass are recorded once per pass shape and resubmitted (recorded_pass.h): a decode
// step of a shape seen before costs the host one vkQueueSubmit and a few small buffer writes.
// Options::record_every_pass (or CLOVER_VK_RECORD_EVERY_PASS=1) records every pass anew instead:
// the plain path, which the tests hold the cached one bitwise equal to.
//
// Denoising passes (block diffusion, guess-then-verify drafts) run like causal ones with three
// differences: the GDN layers scan from a copy of the sequence's state and add the reverse
// in-block path, attention sees the whole block both ways, and the sequence does not advance.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "backend/executor.h"
#include "backend/vulkan/commands.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/executor/device_weights.h"
#include "backend/vulkan/executor/recorded_pass.h"
#include "backend/vulkan/executor/host_experts.h"
#include "backend/vulkan/executor/vulkan_sequence.h"
#include "backend/vulkan/instance.h"
#include "model/model.h"

namespace clover::vulkan {

class VulkanExecutor final : public backend::Executor {
 public:
  struct Options {
    std::string device = "vulkan";  // "vulkan" (the first real GPU), "vulkan:N" or "N"
    int max_batch = 256;
    bool record_every_pass = false;  // no recorded passes kept (also CLOVER_VK_RECORD_EVERY_PASS=1)
    int recorded_passes = 32;        // pass shapes whose command lists are kept (least recently used dropped)
    uint64_t binding_limit = 0;      // tests: a binding limit below the device's (Device::set_binding_limit)
    bool validate = false;          // the Khronos validation layer (also CLOVER_VK_VALIDATE=1)
    bool verbose = true;            // print the device, the upload's progress and the memory used
    // Causal passes run the GDN delta rule's whole aligned 64-position chunks on the chunked scan
    // (gdn_scan.comp); false: every token on the step shader (tests, and the before/after timing).
    bool gdn_scan = true;
    // [layer][expert]: the routed expert stays in host RAM and the CPU computes it (hybrid_moe.cpp);
    // empty: every expert on the device. From backend::plan_placement.
    ExpertsOnHost experts_on_host;
    int n_threads = 0;              // CPU threads for experts in RAM (0: every core)
    // An expert in RAM that this many rows of a pass or more are routed to is uploaded into a
    // staging buffer and computed on the device (hybrid_moe.cpp); 0: never.
    int stream_rows = 0;
    // The CPU computes the experts in RAM while the device runs the layer's shared expert and its
    // own experts (hybrid_moe.cpp); false (also CLOVER_VK_HOST_EXPERTS_SERIAL=1): the device waits
    // for the CPU and the other way round, the plain twin the tests compare bit for bit.
    bool overlap_host_experts = true;
    std::string placement;          // the placement in words (backend::Placement::describe)
    // Layers [first_layer, n_layer) and the head only: the back part of a layer split
    // (backend/layer_split.h), run by run_back(); the earlier layers' weights are not uploaded and
    // its sequences hold the state of its layers only.
    int first_layer = 0;
  };
  // Throws VulkanError (no driver, no such device, a weight type without a shader).
  VulkanExecutor(const model::Model& model, const Options& opts);
  ~VulkanExecutor() override;

  std::string_view name() const override { return name_; }
  const model::Model& model() const override { return model_; }
  int max_batch() const override { return max_batch_; }
  int n_threads() const override;
  std::unique_ptr<backend::Sequence> new_sequence(int n_ctx, backend::KvTypes types) override;
  void run(std::span<backend::Pass> passes) override;
  using Executor::run;
  void trace_routing(std::FILE* f) override { routing_trace_ = f; }
  // The back part of a layer split: the passes from their hidden rows after layer first_layer - 1
  // (hidden: [N][n_embd], stacked in pass order, as CpuExecutor::run_front writes them) through
  // the remaining layers and the head. The passes' tokens within max_batch together.
  void run_back(std::span<backend::Pass> passes, const float* hidden);
  int first_layer() const { return first_layer_; }
  std::string placement() const override { return placement_; }
  // Experts kept in RAM are read from the mapped file by the CPU (the pre-fault pays there).
  bool reads_host_weights() const override { return host_experts_ != nullptr; }
  uint64_t device_memory_bytes() const override;

  Device& device() { return *dev_; }
  const Instance& instance() const { return *instance_; }
  // The recorded passes kept (nullptr when every pass is recorded anew).
  const PassCache* recorded_passes() const { return cache_.get(); }
  // "weights X MiB, caches Y MiB, ..." from the device's memory account.
  std::string memory_summary() const;
  // Experts in RAM streamed to the device and computed there so far (Options::stream_rows).
  uint64_t streamed_experts() const { return stream_ ? stream_->streamed : 0; }
  // Host steps that ran while the device ran the next segment (experts in RAM beside the
  // device's part of their layer): a statistic for tests.
  uint64_t overlapped_host_steps() const { return overlapped_; }

 private:
  struct Scratch;
  void check(const backend::Pass& p) const;
  void check_all(std::span<backend::Pass> passes) const;
  void run_stacked(std::span<backend::Pass> passes);
  // Every row a pass stack wants from the head: its stacked row, its pass, its row in the pass's
  // logits / top. Chunks of Scratch::head_rows rows share the logits scratch.
  struct HeadRow {
    int64_t row;
    backend::Pass* pass;
    int64_t out;
  };
  std::vector<HeadRow> head_rows(std::span<backend::Pass> passes, const std::vector<int>& row0) const;
  void record_pass(RecordedPass& r, std::span<backend::Pass> passes, const std::vector<int>& row0, int N,
                   const std::vector<HeadRow>& want);
  void begin_segment();
  // Ends the segment being recorded with a host step (run after it completes; see RecordedPass)
  // and begins the next: for a pass that needs the host in its middle. beside_next: host work
  // run while the next segment executes (RecordedPass::Segment).
  void split_pass(std::function<void()> host_step, std::function<void()> beside_next = nullptr);
  void record_head_chunk(const std::vector<HeadRow>& want, size_t chunk);
  void read_head_chunk(const std::vector<HeadRow>& want, size_t chunk);
  // The split points of a layer with experts in host RAM (hybrid_moe.cpp): after the routing, the
  // host reads the device's input rows h and groups; record_device_part records the layer's
  // device work that does not need the CPU's rows (the shared expert, the device's own experts),
  // which runs while the CPU computes the rows routed to experts in RAM and writes their down rows
  // to d (beside the device's experts' rows); the pass records on from the combine.
  // The MoE scratch a host step reads and writes: input rows h [N][sE], the groups, the routed
  // rows' gate, up [N k][sFF] and down [N k][n_embd] products.
  struct MoeRows {
    const Buffer *h, *groups, *g, *u, *d;
    int64_t sE, sFF;
  };
  void run_host_experts(int il, int N, const MoeRows& r, const std::function<void()>& record_device_part);
  // Uploads `experts` (of layer il, at most backend::kStreamedExperts) into the stream's staging
  // and submits their products over their routed rows into r.g, r.u and r.d; returns the
  // submission's timeline value.
  uint64_t stream_experts(int il, int N, const std::vector<int>& experts, const MoeRows& r);
  // Activation rows quantised once for all the block-type products that read them, in each kind
  // (activation_kind: Q8_0, Q8_1, Q8_K) some product needs (a file may mix them on one input;
  // need(): bit 1 << kind).
  struct QuantActs {
    const Q8Activations* kinds[3] = {};
    // The activations products with `t` weights read (nullptr for float weights).
    const Q8Activations* for_type(DType t) const {
      return reads_q8_activations(t) ? kinds[static_cast<int>(activation_kind(t))] : nullptr;
    }
  };
  // A layer's ops. Each takes its input rows h quantised in the kinds its products need (hq, by
  // whoever normed h: the norms quantise as they write, rms_norm.comp QUANT) and record_layer
  // returns the next layer's, normed and quantised in the dispatch that closes this layer.
  QuantActs record_layer(int il, std::span<backend::Pass> passes, const std::vector<int>& row0, int N, const QuantActs& hq);
  void record_gdn(int il, std::span<backend::Pass> passes, const std::vector<int>& row0, int N, const QuantActs& hq);
  void record_attention(int il, std::span<backend::Pass> passes, const std::vector<int>& row0, int N, const QuantActs& hq);
  void record_moe(int il, int N, const QuantActs& hq);
  // The activation kinds of the products that read a layer's normed rows: its mixer's
  // projections, its MoE block's.
  unsigned mixer_needs(int il) const;
  unsigned moe_needs(int il) const;
  // Rows y (rows of cols, stride apart) written by `op` (a norm, the attention gate), quantised for
  // the kinds `needed`: op is handed the first kind's scratch (nullptr for none) to quantise into
  // in its own dispatch; any other kind (a file mixing kinds on one input) gets a dispatch of its own.
  QuantActs write_quantized(unsigned needed, BufferRange y, int64_t rows, int64_t cols, int64_t stride,
                            const std::function<void(const Q8Activations*)>& op);
  // `slot` picks one of several buffers of the same width, so two quantised inputs can be live at
  // once (the shared expert's beside the routed experts': no write-after-read barrier between them).
  QuantActs quantize(unsigned needed, BufferRange x, int64_t rows, int64_t cols, int64_t stride, int slot = 0);
  // g = silu(g) * u over rows, then quantised as quantize() does: one dispatch where one kind is
  // needed (record_swiglu_quantize), swiglu alone for float weights.
  QuantActs swiglu_quantize(unsigned needed, BufferRange g, BufferRange u, int64_t rows, int64_t cols, int64_t stride,
                            int slot = 0);
  const Q8Activations& q8_scratch(int64_t cols, int kind, int slot);  // quantize()'s buffers, made on first use
  void matmul(const DeviceMatrix& w, BufferRange x, int64_t stride, const QuantActs& q8, int64_t rows, BufferRange y,
              int64_t y_stride);
  // Floats per row of a scratch matrix of n columns, so every row starts at a bindable offset.
  int64_t stride(int64_t n) const;
  BufferRange rows(const Buffer& b, int64_t row0, int64_t row_stride) const;

  const model::Model& model_;
  const model::HParams& hp_;
  int max_batch_;
  int first_layer_;                    // layers [first_layer_, n_layer) run here
  const float* hidden_in_ = nullptr;   // run_back: the pass's input rows instead of the embedding
  bool gdn_scan_;
  std::unique_ptr<Instance> instance_;
  std::unique_ptr<Device> dev_;
  std::string name_;
  DeviceWeights w_;
  std::unique_ptr<Scratch> s_;
  std::unique_ptr<PassCache> cache_;  // null: every pass recorded anew into plain_
  RecordedPass plain_;
  RecordedPass* recording_ = nullptr;  // the pass being recorded
  CommandList* rec_ = nullptr;         // its list being recorded
  std::map<std::tuple<int64_t, int, int>, Q8Activations> q8_;  // by (columns, kind, slot)
  std::FILE* routing_trace_ = nullptr;
  std::unique_ptr<HostExperts> host_experts_;  // when some layer's experts are in RAM
  int stream_rows_ = 0;                        // Options::stream_rows
  bool overlap_host_ = true;                   // Options::overlap_host_experts
  uint64_t overlapped_ = 0;                    // overlapped_host_steps()
  std::unique_ptr<ExpertStream> stream_;       // when stream_rows_ > 0 and experts are in RAM
  std::string placement_;
};

}  // namespace clover::vulkan
