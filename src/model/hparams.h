// Hyperparameters of a Clover / qwen35moe model, read from GGUF metadata and checked against the
// tensor shapes. See ../shared/CLOVER-SPEC.md section 3 for the three file layouts.
#pragma once
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace clover::gguf {
class Reader;
}

namespace clover::model {

struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The three layouts a Clover-family file comes in (CLOVER-SPEC 3.1).
enum class Layout {
  Official,     // clover_moe as DiffuSpace publishes it: ssm_rev_* tensors, ssm_a holds A_log, no expert_shared_count
  LlamaClover,  // clover_moe as patched for llama.cpp v0.9.0: expert_shared_count, no ssm_rev_*, ssm_a = -exp(A_log)
  Qwen35Moe,    // qwen35moe: the base architecture as released llama.cpp loads it
};
const char* layout_name(Layout l);

// The longest GDN causal conv accepted (Qwen3.5/3.6 and Clover use 4).
inline constexpr int kMaxConvKernel = 16;

struct HParams {
  std::string arch;  // general.architecture, the metadata key prefix
  Layout layout = Layout::Qwen35Moe;

  int n_layer = 0;              // layers run by the forward pass (block_count - nextn_predict_layers)
  int n_nextn = 0;              // MTP layers stored after them (never run)
  std::vector<bool> recurrent;  // per layer: true = Gated DeltaNet, false = gated full attention
  int n_embd = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
  float rms_eps = 1e-6f;

  // Gated full attention.
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int n_rot = 0;               // rotary dims (NEOX pairing on the first n_rot of head_dim)
  float rope_theta = 10000.f;
  std::array<int, 4> rope_sections{};

  // Gated DeltaNet.
  int gdn_k_heads = 0;   // H_k  (ssm.group_count)
  int gdn_v_heads = 0;   // H_v  (ssm.time_step_rank)
  int gdn_head_dim = 0;  // d_k = d_v (ssm.state_size)
  int conv_kernel = 0;   // K    (ssm.conv_kernel), at most kMaxConvKernel

  // Mixture of experts.
  int n_expert = 0, n_expert_used = 0;
  int n_ff_exp = 0, n_ff_shexp = 0;
  int n_expert_shared = 1;

  // Block diffusion (CLOVER-SPEC section 2); defaults apply when the file has no such keys.
  int block_size = 32;
  float threshold = 0.95f;
  int mask_token = -1;          // -1: unknown (looked up as "<|mask|>" in the vocabulary by the loader)
  bool has_reverse_path = false;  // ssm_rev_* tensors present

  int gdn_qkv_dim() const { return 2 * gdn_k_heads * gdn_head_dim + gdn_v_heads * gdn_head_dim; }
  int gdn_v_dim() const { return gdn_v_heads * gdn_head_dim; }
  int n_attn_layers() const;
  int n_gdn_layers() const;
};

// Reads and validates the hyperparameters (layout detection included). Throws ModelError naming
// the key or tensor at fault. `warnings` receives non-fatal findings.
HParams read_hparams(const gguf::Reader& r, std::vector<std::string>& warnings);

}  // namespace clover::model
