// The state of one sequence: what the committed tokens left behind. Attention layers keep K and V
// for every position; Gated DeltaNet layers keep a constant-size state (the last K-1 conv inputs
// and one d_k x d_v matrix per value head), which is why it cannot be truncated, only copied.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/hparams.h"

namespace clover::model {

// A float array that is not zero-filled at allocation, so an unused long KV cache costs address
// space, not memory.
class FloatBuffer {
 public:
  FloatBuffer() = default;
  explicit FloatBuffer(size_t n) : data_(new float[n]), size_(n) {}
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<float[]> data_;
  size_t size_ = 0;
};

struct GdnLayerState {
  std::vector<float> conv;  // [K-1][qkv channels], oldest first (pre-conv inputs)
  std::vector<float> ssm;   // [H_v][d_v][d_k]: ssm[h][j][i] = S_h[i][j] (rows contiguous for S^T x)
};

struct SequenceState {
  SequenceState(const HParams& hp, int n_ctx);

  int n_ctx;       // positions the KV cache holds
  int n_past = 0;  // committed tokens

  // Per attention layer (in layer order): [n_ctx][n_head_kv * head_dim]; K after norm and rope.
  // Rows at and beyond n_past are scratch (a denoising pass writes its block there).
  std::vector<FloatBuffer> k, v;
  std::vector<GdnLayerState> gdn;  // per GDN layer, in layer order
  std::vector<int> slot;           // per model layer: index into k/v or into gdn

  void reset();                         // back to an empty sequence
  size_t kv_bytes() const;              // allocated KV cache
  size_t recurrent_bytes() const;       // GDN state
  // Copies the GDN state (not the KV cache) from another state of the same model.
  void copy_recurrent_from(const SequenceState& other);
};

}  // namespace clover::model
