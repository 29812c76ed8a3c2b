// Synthetic models of the Clover architecture: seeded random weights at any scale, in any of the
// three file layouts, with a byte-level BPE tokenizer (Qwen special tokens and <|mask|>), the
// Qwen3.5 chat template and the diffusion metadata. The same seed gives the same model (the same
// AR logits) in every layout and the same weights whatever the storage type, because every
// tensor (and every expert of a stacked tensor) has its own random stream derived from the seed
// and its name.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"
#include "model/hparams.h"

namespace clover::synth {

struct SynthConfig {
  int n_layer = 4;
  std::string layer_pattern = "LLLF";  // repeated to n_layer: L = Gated DeltaNet, F = full attention
  int n_embd = 128;
  int n_vocab = 512;
  int n_ctx_train = 4096;
  int n_head = 4, n_head_kv = 2, head_dim = 64, n_rot = 16;
  float rope_theta = 1e7f;
  int gdn_k_heads = 2, gdn_v_heads = 4, gdn_head_dim = 32, conv_kernel = 4;
  int n_expert = 8, n_expert_used = 2, n_ff_exp = 64, n_ff_shexp = 96;
  float rms_eps = 1e-6f;
  int block_size = 32;
  float threshold = 0.95f;

  DType type = DType::F32;          // matrices; norms, routers, conv and 1-D tensors stay F32
  DType embd_type = DType::F32;     // token_embd (defaults to `type` unless set explicitly)
  DType output_type = DType::F32;   // output.weight
  bool embd_type_set = false, output_type_set = false;
  std::string mixture;              // a llama-quantize preset ("Q4_K_M"): its per-tensor types replace the above
  model::Layout layout = model::Layout::Official;
  uint64_t seed = 42;
  bool fuse_qkv = false;       // attention q/k/v as one attn_qkv tensor
  bool fuse_gate_up = false;   // ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps
  bool tie_output = false;     // no output.weight (the head reuses token_embd)
  bool recurrent_key = true;   // write attention.recurrent_layers (else only full_attention_interval)
  std::string vocab_hf_json;   // take the vocabulary from a Hugging Face tokenizer.json
  std::string name = "clover-synth";
};

// Presets: "tiny" (1.4 M parameters, tests), "mid" (~0.5 B, benchmarks), "slice" (4 layers with the
// real Clover layer shapes and vocabulary), "clover-35b" (the full Clover-35B-A3B dimensions).
SynthConfig preset(std::string_view name);

using ProgressFn = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;

// Writes the model to `path` (atomically: a temporary file renamed at the end) with memory bounded
// by the largest single expert matrix, not by the model size. Throws on invalid configurations.
void write_model(const SynthConfig& cfg, const std::string& path, const ProgressFn& progress = {});

// The tensor table write_model would write (names, dims ne0 first, types with the mixture
// applied), without writing anything: the shapes of a 20 GB model for planners and tests.
struct TensorShape {
  std::string name;
  std::vector<int64_t> dims;
  DType type = DType::F32;
  uint64_t bytes() const;  // as stored
};
std::vector<TensorShape> tensor_shapes(const SynthConfig& cfg);
// The hyperparameters a loader reads from the file write_model would write.
model::HParams hparams_of(const SynthConfig& cfg);

// The layer pattern expanded to n_layer letters.
std::string expand_pattern(const SynthConfig& cfg);

}  // namespace clover::synth
