// The CPU backend's sequence: what the committed tokens left behind, in host memory. Attention
// layers keep K and V for every position (the KV cache, in f32, f16 or q8_0); Gated DeltaNet
// layers keep a constant-size state (the conv window: the last K-1 conv inputs; and one d_k x d_v
// matrix per value head), which is why it cannot be truncated, only copied (snapshots), and why
// its size does not grow with the context.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/executor.h"
#include "kernels/attention.h"
#include "model/hparams.h"
#include "runtime/huge_pages.h"

namespace clover::backend::cpu {

// A byte array that is not zero-filled at allocation, so an unused long KV cache costs address
// space, not memory.
class KvBuffer {
 public:
  KvBuffer() = default;
  explicit KvBuffer(size_t n) : data_(new uint8_t[n]), size_(n) {}
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

struct GdnLayerState {
  std::vector<float> conv_window;  // [K-1][qkv channels], oldest first (pre-conv inputs)
  // [H_v][d_v][d_k]: ssm[h][j][i] = S_h[i][j] (rows contiguous for S^T x). Every step sweeps it whole:
  // huge pages where the kernel grants them (runtime/huge_pages.h).
  runtime::HugePageVector<float> ssm;
};

// The recurrent state of every GDN layer and the sequence length it belongs to.
class CpuSnapshot final : public Snapshot {
 public:
  int n_past() const override { return n_past_; }
  size_t bytes() const override;

 private:
  friend class CpuSequence;
  int n_past_ = 0;
  std::vector<GdnLayerState> gdn_;
};

class CpuSequence final : public Sequence {
 public:
  // Throws ModelError when a cache type is not one of f32, f16, q8_0 or does not suit the head
  // dimension (q8_0 needs a multiple of 32). The state of layers [0, n_layers) (-1: every layer;
  // fewer for the front of a layer split).
  CpuSequence(const model::HParams& hp, int n_ctx, KvTypes types = {}, int n_layers = -1);

  int n_past() const override { return n_past_; }
  int n_ctx() const override { return n_ctx_; }
  void reset() override;
  void truncate(int n) override;
  std::unique_ptr<Snapshot> new_snapshot() const override { return std::make_unique<CpuSnapshot>(); }
  void save(Snapshot& into) const override;
  void restore(const Snapshot& from) override;
  size_t kv_bytes() const override;
  size_t recurrent_bytes() const override;
  std::vector<uint8_t> committed_state() const override;

  // --- for the CPU executor ---
  const KvTypes& types() const { return types_; }
  void advance(int n) { n_past_ += n; }  // a causal pass committed n tokens
  int layer_slot(int il) const { return slot_[il]; }  // index into the KV caches or the GDN states
  GdnLayerState& gdn(int slot) { return gdn_[slot]; }
  const GdnLayerState& gdn(int slot) const { return gdn_[slot]; }
  uint8_t* k_row(int kv_slot, int64_t pos) { return k_[kv_slot].data() + static_cast<size_t>(pos) * k_row_bytes_; }
  uint8_t* v_row(int kv_slot, int64_t pos) { return v_[kv_slot].data() + static_cast<size_t>(pos) * v_row_bytes_; }
  // The keys / values of one KV head of one layer, for the attention kernel. Rows at and beyond
  // n_past are scratch (a denoising pass writes its block there).
  kernels::KvHeadRef k_head(int kv_slot, int head) const;
  kernels::KvHeadRef v_head(int kv_slot, int head) const;

 private:
  int n_ctx_;
  int n_past_ = 0;
  KvTypes types_;
  size_t k_row_bytes_ = 0, v_row_bytes_ = 0;    // one position, every KV head
  size_t k_head_bytes_ = 0, v_head_bytes_ = 0;  // one position, one KV head
  // Per attention layer (in layer order): [n_ctx][n_head_kv][head_dim] of types.k / types.v; K
  // after norm and rope.
  std::vector<KvBuffer> k_, v_;
  std::vector<GdnLayerState> gdn_;  // per GDN layer, in layer order
  std::vector<int> slot_;           // per layer it holds: index into k_/v_ or into gdn_
};

}  // namespace clover::backend::cpu
