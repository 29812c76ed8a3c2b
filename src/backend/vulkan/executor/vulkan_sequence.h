// The Vulkan backend's sequence: the same state as the CPU's (backend/cpu/sequence.h), kept in
// device memory. Per attention layer a K and a V cache buffer ([n_ctx][n_head_kv][head_dim] in
// the cache type, the CPU's layout, so committed_state() reads the same bytes); the recurrent
// state of every GDN layer in one buffer (per layer: the conv window [K-1][C], then the state
// [H_v][d][d], each part at an offset the device can bind), so a snapshot is one device copy.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/executor.h"
#include "backend/vulkan/device.h"
#include "model/hparams.h"

namespace clover::vulkan {

class VulkanSnapshot final : public backend::Snapshot {
 public:
  int n_past() const override { return n_past_; }
  size_t bytes() const override { return bytes_; }

 private:
  friend class VulkanSequence;
  int n_past_ = 0;
  size_t bytes_ = 0;  // the recurrent state's own bytes (alignment padding not counted)
  const void* owner_ = nullptr;  // the device the copy lives on
  Buffer state_;
};

class VulkanSequence final : public backend::Sequence {
 public:
  // Throws model::ModelError for cache types that do not suit the model. The state of layers
  // [first_layer, n_layer) (the back of a layer split holds no state of the CPU's layers).
  VulkanSequence(Device& dev, const model::HParams& hp, int n_ctx, backend::KvTypes types, int first_layer = 0);

  int n_past() const override { return n_past_; }
  int n_ctx() const override { return n_ctx_; }
  void reset() override;
  void truncate(int n) override;
  std::unique_ptr<backend::Snapshot> new_snapshot() const override { return std::make_unique<VulkanSnapshot>(); }
  void save(backend::Snapshot& into) const override;
  void restore(const backend::Snapshot& from) override;
  size_t kv_bytes() const override;
  size_t recurrent_bytes() const override { return recurrent_bytes_; }
  std::vector<uint8_t> committed_state() const override;

  // --- for the Vulkan executor ---
  const Device& device() const { return dev_; }
  // Never the same for two sequences of a process (a recorded pass names the sequences whose
  // buffers it binds by this; an address could be reused by the next sequence).
  uint64_t id() const { return id_; }
  const backend::KvTypes& types() const { return types_; }
  void advance(int n) { n_past_ += n; }
  int layer_slot(int il) const { return slot_[il]; }
  const Buffer& k_cache(int slot) const { return k_[slot]; }
  const Buffer& v_cache(int slot) const { return v_[slot]; }
  uint64_t k_row_bytes() const { return k_row_bytes_; }
  uint64_t v_row_bytes() const { return v_row_bytes_; }
  uint64_t k_head_bytes() const { return k_head_bytes_; }
  uint64_t v_head_bytes() const { return v_head_bytes_; }
  // The conv window and the recurrent state of GDN slot `slot` in the state buffer.
  BufferRange conv_state(int slot) const { return {&state_, conv_off_[slot], conv_bytes_}; }
  BufferRange ssm_state(int slot) const { return {&state_, ssm_off_[slot], ssm_bytes_}; }
  // The state buffer, and the same ranges in another buffer of its size and layout (a denoising
  // pass scans from such a copy and leaves the sequence's own state as it was).
  const Buffer& state_buffer() const { return state_; }
  BufferRange conv_state(int slot, const Buffer& in) const { return {&in, conv_off_[slot], conv_bytes_}; }
  BufferRange ssm_state(int slot, const Buffer& in) const { return {&in, ssm_off_[slot], ssm_bytes_}; }

 private:
  Device& dev_;
  uint64_t id_;
  int n_ctx_;
  int n_past_ = 0;
  backend::KvTypes types_;
  uint64_t k_row_bytes_ = 0, v_row_bytes_ = 0, k_head_bytes_ = 0, v_head_bytes_ = 0;
  std::vector<Buffer> k_, v_;
  Buffer state_;
  uint64_t conv_bytes_ = 0, ssm_bytes_ = 0;
  std::vector<uint64_t> conv_off_, ssm_off_;
  size_t recurrent_bytes_ = 0;
  std::vector<int> slot_;  // per model layer: index into k_/v_ or the GDN offsets (-1: not held here)
};

}  // namespace clover::vulkan
