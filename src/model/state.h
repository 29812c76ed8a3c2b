// The state of one sequence: what the committed tokens left behind. Attention layers keep K and V
// for every position (the KV cache, in f32, f16 or q8_0); Gated DeltaNet layers keep a
// constant-size state (the last K-1 conv inputs and one d_k x d_v matrix per value head), which is
// why it cannot be truncated, only copied, and why its size does not grow with the context.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "model/hparams.h"

namespace clover::model {

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
  std::vector<float> conv;  // [K-1][qkv channels], oldest first (pre-conv inputs)
  std::vector<float> ssm;   // [H_v][d_v][d_k]: ssm[h][j][i] = S_h[i][j] (rows contiguous for S^T x)
};

// The element types of the K and V caches (F32, F16 or Q8_0, as llama.cpp's -ctk / -ctv).
struct KvTypes {
  DType k = DType::F32, v = DType::F32;
};

struct SequenceState {
  // Throws ModelError when a cache type is not one of f32, f16, q8_0 or does not suit the head
  // dimension (q8_0 needs a multiple of 32).
  SequenceState(const HParams& hp, int n_ctx, KvTypes types = {});

  int n_ctx;       // positions the KV cache holds
  int n_past = 0;  // committed tokens
  KvTypes types;
  size_t k_row_bytes = 0, v_row_bytes = 0;  // one position, every KV head
  size_t k_head_bytes = 0, v_head_bytes = 0;  // one position, one KV head

  // Per attention layer (in layer order): [n_ctx][n_head_kv][head_dim] of types.k / types.v; K
  // after norm and rope. Rows at and beyond n_past are scratch (a denoising pass writes its block
  // there).
  std::vector<KvBuffer> k, v;
  std::vector<GdnLayerState> gdn;  // per GDN layer, in layer order
  std::vector<int> slot;           // per model layer: index into k/v or into gdn

  uint8_t* k_row(int kv_slot, int64_t pos) { return k[kv_slot].data() + static_cast<size_t>(pos) * k_row_bytes; }
  uint8_t* v_row(int kv_slot, int64_t pos) { return v[kv_slot].data() + static_cast<size_t>(pos) * v_row_bytes; }
  // The keys / values of one KV head of one layer, for the attention kernel.
  kernels::KvHeadRef k_head(int kv_slot, int head) const;
  kernels::KvHeadRef v_head(int kv_slot, int head) const;

  void reset();                         // back to an empty sequence
  size_t kv_bytes() const;              // allocated KV cache
  size_t recurrent_bytes() const;       // GDN state
  // Copies the GDN state (not the KV cache) from another state of the same model.
  void copy_recurrent_from(const SequenceState& other);

  // The KV cache of n_ctx positions, by formula: n_attn_layers x n_ctx x n_head_kv x
  // (row bytes of head_dim K values + row bytes of head_dim V values).
  static size_t kv_bytes_for(const HParams& hp, int64_t n_ctx, KvTypes types);
  // The GDN state, by formula (what recurrent_bytes() of any state of this model returns).
  static size_t recurrent_bytes_for(const HParams& hp);
  // Throws ModelError when the cache types do not suit the model (what the constructor checks).
  static void check_kv_types(const HParams& hp, KvTypes types);
};

}  // namespace clover::model
