// -ngl N below the model's layer count: the first layers on the CPU, the rest on the GPU.
//
// As llama.cpp counts it, -ngl N puts the LAST N repeating layers on the device; here the output
// head goes with them (llama.cpp keeps it on the CPU unless N > n_layer; on a GPU it is the
// cheaper place for the one large matrix every pass reads). The token embedding stays on the
// CPU as always. One pass through the split, for a stack of passes of N rows in all:
//
//   CpuExecutor::run_front      x = embed(tokens); layers [0, k)           -> hidden [N][n_embd]
//   VulkanExecutor::run_back    hidden uploaded;   layers [k, L); the head -> logits / selection
//
// Each side runs its layers exactly as it runs them for the whole model (the same summation
// orders, the same batch invariance), so a row's result does not depend on what else shares the
// pass, and a sequence's state is the union of the two sides' states. A long causal pass is cut
// where the Vulkan executor cuts it alone (at multiples of its GDN scan's chunk), so the device's
// layers see the chunks they would see without the split.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/cpu_executor.h"
#include "backend/executor.h"
#include "backend/vulkan/executor/vulkan_executor.h"

namespace clover::backend {

// A sequence of the split: the CPU's state of layers [0, k) and the device's of [k, L), always
// the same length.
class SplitSequence final : public Sequence {
 public:
  SplitSequence(const model::HParams& hp, int first_device_layer, KvTypes types, std::unique_ptr<Sequence> front,
                std::unique_ptr<Sequence> back);

  int n_past() const override { return front_->n_past(); }
  int n_ctx() const override { return front_->n_ctx(); }
  void reset() override;
  void truncate(int n) override;
  std::unique_ptr<Snapshot> new_snapshot() const override;
  void save(Snapshot& into) const override;
  void restore(const Snapshot& from) override;
  size_t kv_bytes() const override { return front_->kv_bytes() + back_->kv_bytes(); }
  size_t recurrent_bytes() const override { return front_->recurrent_bytes() + back_->recurrent_bytes(); }
  // The backend-neutral layout (executor.h): both sides' attention layers in layer order, then
  // both sides' GDN layers.
  std::vector<uint8_t> committed_state() const override;

  Sequence& front() { return *front_; }
  Sequence& back() { return *back_; }

 private:
  size_t attention_bytes(int n_attn_layers) const;  // of the committed positions, K and V
  int front_attn_ = 0;                              // attention layers among [0, k)
  size_t kv_row_bytes_ = 0;                         // one position of one layer, K and V
  std::unique_ptr<Sequence> front_, back_;
};

class LayerSplitExecutor final : public Executor {
 public:
  // front: a CpuExecutor of layers [0, k); back: a VulkanExecutor of layers [k, L) (first_layer k),
  // both of the same max_batch.
  LayerSplitExecutor(std::unique_ptr<cpu::CpuExecutor> front, std::unique_ptr<vulkan::VulkanExecutor> back);

  std::string_view name() const override { return back_->name(); }
  const model::Model& model() const override { return back_->model(); }
  bool reads_host_weights() const override { return true; }  // the CPU's layers read the file's bytes
  int max_batch() const override { return back_->max_batch(); }
  int n_threads() const override { return front_->n_threads(); }
  std::unique_ptr<Sequence> new_sequence(int n_ctx, KvTypes types) override;
  void run(std::span<Pass> passes) override;
  using Executor::run;
  void trace_routing(std::FILE* f) override;
  std::string placement() const override;
  uint64_t device_memory_bytes() const override { return back_->device_memory_bytes(); }

  int first_device_layer() const { return k_; }
  // "layers 0-3 on the CPU, layers 4-7 and the output head on vulkan:0 (...)"
  std::string describe_layers() const;
  vulkan::VulkanExecutor& back() { return *back_; }

 private:
  void run_split(std::span<Pass> passes);  // a stack within max_batch

  std::unique_ptr<cpu::CpuExecutor> front_;
  std::unique_ptr<vulkan::VulkanExecutor> back_;
  int k_;
  std::vector<float> hidden_;  // [max_batch][n_embd]: the rows handed from the CPU to the device
  std::vector<Pass> front_passes_, back_passes_;
};

}  // namespace clover::backend
