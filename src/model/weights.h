// The model's weights as views into the mapped GGUF file (zero copy), bound by name and checked
// against the hyperparameters. Only the few values the official layout stores in another form
// (A_log) are converted into owned buffers at load.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/hparams.h"

namespace clover::model {

using kernels::MatRef;

// A stack of per-expert matrices stored as one 3-D tensor {cols, rows, n_expert}.
struct ExpertsRef {
  MatRef first;              // expert 0
  size_t expert_stride = 0;  // bytes between consecutive experts
  MatRef expert(int e) const {
    MatRef m = first;
    m.data = static_cast<const uint8_t*>(first.data) + static_cast<size_t>(e) * expert_stride;
    return m;
  }
};

struct AttentionWeights {
  MatRef q;  // {n_embd -> 2*n_head*head_dim}: per head [query | output gate]
  MatRef k, v;
  MatRef o;
  const float* q_norm = nullptr;  // {head_dim}, stored +1
  const float* k_norm = nullptr;
};

struct GdnWeights {
  MatRef qkv;    // {n_embd -> 2*H_k*d + H_v*d}
  MatRef gate;   // z: {n_embd -> H_v*d}
  MatRef beta;   // {n_embd -> H_v}
  MatRef alpha;  // {n_embd -> H_v}
  MatRef out;    // {H_v*d -> n_embd}
  const float* conv1d = nullptr;   // [channel][K]: the depthwise conv taps, oldest first
  const float* dt_bias = nullptr;  // {H_v}
  const float* a = nullptr;        // {H_v}, -exp(A_log) < 0
  const float* norm = nullptr;     // {d}, not shifted
  // Reverse in-block path (official layout only; CLOVER-SPEC 3.3).
  MatRef rev_alpha, rev_beta;
  const float* rev_dt_bias = nullptr;
  const float* rev_a = nullptr;  // -exp(A_log_rev)
};

struct MoeWeights {
  MatRef router;  // {n_embd -> n_expert}
  ExpertsRef gate, up, down;
  MatRef shared_gate_inp;  // {n_embd -> 1}
  MatRef shared_gate, shared_up, shared_down;
};

struct LayerWeights {
  bool recurrent = false;
  const float* attn_norm = nullptr;  // {n_embd}, stored +1
  const float* post_norm = nullptr;
  AttentionWeights attn;
  GdnWeights gdn;
  MoeWeights moe;
};

struct ModelWeights {
  MatRef token_embd;  // {n_embd, n_vocab}: one row per token
  MatRef output;      // the LM head (token_embd when tied)
  bool tied_output = false;
  const float* output_norm = nullptr;
  std::vector<LayerWeights> layers;
  std::vector<std::unique_ptr<float[]>> owned;  // converted tensors
};

// Binds every tensor, checks names, shapes and types, converts A_log (official layout) and fills
// expert sizes missing from the metadata. Throws ModelError naming the tensor at fault; rejects
// tensors it does not know (other than MTP layers), like llama.cpp does.
ModelWeights bind_weights(const gguf::Reader& r, HParams& hp, std::vector<std::string>& warnings);

}  // namespace clover::model
