#include "model/hparams.h"

#include <cmath>
#include <fmt/format.h>

#include "gguf/gguf.h"

namespace clover::model {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Official: return "official (clover_moe, with the reverse in-block GDN path)";
    case Layout::LlamaClover: return "llama-clover (clover_moe as patched for llama.cpp)";
    case Layout::Qwen35Moe: return "qwen35moe";
  }
  return "?";
}

int HParams::n_attn_layers() const {
  int n = 0;
  for (bool r : recurrent) n += r ? 0 : 1;
  return n;
}
int HParams::n_gdn_layers() const { return n_layer - n_attn_layers(); }

namespace {

using gguf::Reader;
using gguf::Value;
using gguf::ValueType;

// A u32 key that may also be an array with one equal value per layer (llama.cpp's get_key_or_arr).
std::optional<uint32_t> u32_or_uniform_array(const Reader& r, const std::string& key, int n_layer_all) {
  const Value* v = r.find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::Array) return r.get_u32(key);
  std::vector<int64_t> xs = r.get_int_array(key);
  if (static_cast<int>(xs.size()) != n_layer_all)
    throw ModelError(fmt::format("{}: array of {} values, expected one per block ({})", key, xs.size(), n_layer_all));
  for (int64_t x : xs)
    if (x != xs[0]) throw ModelError(fmt::format("{}: per-layer values differ; this engine needs one value for all layers", key));
  if (xs.empty() || xs[0] < 0) throw ModelError(fmt::format("{}: invalid value", key));
  return static_cast<uint32_t>(xs[0]);
}

int positive(uint32_t v, const std::string& key) {
  if (v == 0 || v > (1u << 30)) throw ModelError(fmt::format("{} = {} is out of range", key, v));
  return static_cast<int>(v);
}

bool has_tensor_with(const Reader& r, std::string_view part) {
  for (const auto& t : r.tensors())
    if (t.name.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

HParams read_hparams(const Reader& r, std::vector<std::string>& warnings) {
  HParams hp;
  hp.arch = r.get_str("general.architecture");
  const std::string A = hp.arch + ".";

  const bool has_rev = has_tensor_with(r, ".ssm_rev_");
  const bool has_shared_count = r.has(A + "expert_shared_count");
  if (hp.arch == "qwen35moe") {
    hp.layout = Layout::Qwen35Moe;
    if (has_rev) throw ModelError("qwen35moe file has ssm_rev_* tensors; only the official clover_moe layout carries them");
  } else if (hp.arch == "clover_moe") {
    if (has_rev && !has_shared_count) {
      hp.layout = Layout::Official;
    } else if (!has_rev && has_shared_count) {
      hp.layout = Layout::LlamaClover;
    } else {
      throw ModelError(fmt::format(
          "clover_moe file of unknown layout: {} ssm_rev_* tensors and {} clover_moe.expert_shared_count key "
          "(official files have the tensors and no key; llama.cpp-patched files the key and no tensors)",
          has_rev ? "has" : "no", has_shared_count ? "a" : "no"));
    }
  } else {
    throw ModelError(fmt::format("unsupported architecture '{}' (expected clover_moe or qwen35moe)", hp.arch));
  }
  hp.has_reverse_path = has_rev;

  const int n_layer_all = positive(r.get_u32(A + "block_count"), A + "block_count");
  hp.n_nextn = static_cast<int>(r.get_u32_opt(A + "nextn_predict_layers").value_or(0));
  if (hp.n_nextn >= n_layer_all) throw ModelError(fmt::format("{}nextn_predict_layers = {} leaves no layers", A, hp.n_nextn));
  hp.n_layer = n_layer_all - hp.n_nextn;

  hp.n_embd = positive(r.get_u32(A + "embedding_length"), A + "embedding_length");
  hp.n_ctx_train = positive(r.get_u32(A + "context_length"), A + "context_length");
  hp.rms_eps = r.get_f32(A + "attention.layer_norm_rms_epsilon");
  if (!(hp.rms_eps > 0.f && hp.rms_eps < 1.f)) throw ModelError(fmt::format("{}attention.layer_norm_rms_epsilon = {} is out of range", A, hp.rms_eps));

  // Layer kinds: explicit per-layer flags, or every `interval`-th layer is full attention.
  if (r.has(A + "attention.recurrent_layers")) {
    std::vector<int64_t> flags = r.get_int_array(A + "attention.recurrent_layers");
    if (static_cast<int>(flags.size()) != n_layer_all)
      throw ModelError(fmt::format("{}attention.recurrent_layers has {} entries, block_count is {}", A, flags.size(), n_layer_all));
    for (int i = 0; i < hp.n_layer; ++i) hp.recurrent.push_back(flags[i] != 0);
  } else {
    const int interval = positive(r.get_u32_opt(A + "full_attention_interval").value_or(4), A + "full_attention_interval");
    for (int i = 0; i < hp.n_layer; ++i) hp.recurrent.push_back((i + 1) % interval != 0);
  }

  hp.n_head = positive(u32_or_uniform_array(r, A + "attention.head_count", n_layer_all).value_or(0), A + "attention.head_count");
  hp.n_head_kv = positive(u32_or_uniform_array(r, A + "attention.head_count_kv", n_layer_all).value_or(hp.n_head), A + "attention.head_count_kv");
  if (hp.n_head % hp.n_head_kv != 0)
    throw ModelError(fmt::format("attention.head_count {} is not a multiple of head_count_kv {}", hp.n_head, hp.n_head_kv));
  const uint32_t key_len = r.get_u32_opt(A + "attention.key_length").value_or(hp.n_embd / hp.n_head);
  const uint32_t val_len = r.get_u32_opt(A + "attention.value_length").value_or(key_len);
  if (key_len != val_len) throw ModelError(fmt::format("attention.key_length {} != value_length {}", key_len, val_len));
  hp.head_dim = positive(key_len, A + "attention.key_length");
  hp.n_rot = static_cast<int>(r.get_u32_opt(A + "rope.dimension_count").value_or(hp.head_dim));
  if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim || hp.n_rot % 2)
    throw ModelError(fmt::format("{}rope.dimension_count = {} must be even and at most the head size {}", A, hp.n_rot, hp.head_dim));
  hp.rope_theta = r.get_f32_opt(A + "rope.freq_base").value_or(10000.f);
  if (!(std::isfinite(hp.rope_theta) && hp.rope_theta > 0.f))
    throw ModelError(fmt::format("{}rope.freq_base = {} must be a finite number above 0", A, hp.rope_theta));
  if (r.has(A + "rope.dimension_sections")) {
    std::vector<int64_t> s = r.get_int_array(A + "rope.dimension_sections");
    if (s.size() != 4) throw ModelError(fmt::format("{}rope.dimension_sections has {} values, expected 4", A, s.size()));
    for (int i = 0; i < 4; ++i) hp.rope_sections[i] = static_cast<int>(s[i]);
  } else if (hp.arch == "qwen35moe") {
    throw ModelError(fmt::format("key not found: {}rope.dimension_sections (required by qwen35moe)", A));
  }
  // Text positions are (p, p, p, 0): a pair whose M-RoPE section is the 4th one would rotate by
  // position 0. Real files use [11,11,10,0] with 64 rotary dims, where that never happens; refuse
  // files where it would, rather than compute something subtly different.
  {
    const int s0 = hp.rope_sections[0], s1 = hp.rope_sections[1], s2 = hp.rope_sections[2], s3 = hp.rope_sections[3];
    const int sum = s0 + s1 + s2 + s3;
    if (sum > 0)
      for (int i = 0; i < hp.n_rot / 2; ++i) {
        const int sector = i % sum;
        const bool text_pos = (sector % 3 == 1 && sector < 3 * s1) || (sector % 3 == 2 && sector < 3 * s2) ||
                              (sector % 3 == 0 && sector < 3 * s0);
        if (!text_pos)
          throw ModelError(fmt::format("{}rope.dimension_sections [{},{},{},{}] leaves rotary pair {} of {} without a text position",
                                       A, s0, s1, s2, s3, i, hp.n_rot / 2));
      }
  }

  hp.conv_kernel = positive(r.get_u32(A + "ssm.conv_kernel"), A + "ssm.conv_kernel");
  if (hp.conv_kernel > kMaxConvKernel)
    throw ModelError(fmt::format("{}ssm.conv_kernel = {} exceeds the supported {}", A, hp.conv_kernel, kMaxConvKernel));
  hp.gdn_head_dim = positive(r.get_u32(A + "ssm.state_size"), A + "ssm.state_size");
  hp.gdn_v_heads = positive(r.get_u32(A + "ssm.time_step_rank"), A + "ssm.time_step_rank");
  hp.gdn_k_heads = positive(r.get_u32(A + "ssm.group_count"), A + "ssm.group_count");
  const uint32_t inner = r.get_u32(A + "ssm.inner_size");
  if (static_cast<int64_t>(inner) != static_cast<int64_t>(hp.gdn_v_heads) * hp.gdn_head_dim)
    throw ModelError(fmt::format("{}ssm.inner_size = {} but time_step_rank x state_size = {} x {}", A, inner, hp.gdn_v_heads, hp.gdn_head_dim));
  if (hp.gdn_v_heads % hp.gdn_k_heads != 0)
    throw ModelError(fmt::format("GDN value heads {} are not a multiple of key heads {}", hp.gdn_v_heads, hp.gdn_k_heads));

  hp.n_expert = positive(r.get_u32_opt(A + "expert_count").value_or(0), A + "expert_count");
  hp.n_expert_used = positive(u32_or_uniform_array(r, A + "expert_used_count", n_layer_all).value_or(0), A + "expert_used_count");
  if (hp.n_expert_used > hp.n_expert)
    throw ModelError(fmt::format("expert_used_count {} exceeds expert_count {}", hp.n_expert_used, hp.n_expert));
  // Expert sizes default from the tensors when absent (llama.cpp falls back to feed_forward_length).
  if (auto v = u32_or_uniform_array(r, A + "expert_feed_forward_length", n_layer_all)) hp.n_ff_exp = positive(*v, A + "expert_feed_forward_length");
  if (auto v = r.get_u32_opt(A + "expert_shared_feed_forward_length")) hp.n_ff_shexp = positive(*v, A + "expert_shared_feed_forward_length");
  if (hp.layout == Layout::LlamaClover) {
    hp.n_expert_shared = static_cast<int>(r.get_u32(A + "expert_shared_count"));
    if (hp.n_expert_shared != 1) throw ModelError(fmt::format("{}expert_shared_count = {}; this engine supports exactly one shared expert", A, hp.n_expert_shared));
  }

  // Vocabulary size comes from the token list; the embedding must agree (checked with the tensors).
  if (r.has("tokenizer.ggml.tokens")) {
    const Value* toks = r.find("tokenizer.ggml.tokens");
    hp.n_vocab = static_cast<int>(std::get<std::vector<Value>>(toks->v).size());
  }

  // Diffusion metadata (DECISION on names, CLOVER-SPEC 3.2).
  hp.block_size = static_cast<int>(r.get_u32_opt(A + "diffusion.block_size").value_or(32));
  if (hp.block_size < 2 || hp.block_size > 256) throw ModelError(fmt::format("{}diffusion.block_size = {} is out of range [2, 256]", A, hp.block_size));
  hp.threshold = r.get_f32_opt(A + "diffusion.threshold").value_or(0.95f);
  if (!std::isfinite(hp.threshold)) throw ModelError(fmt::format("{}diffusion.threshold is not finite", A));
  if (auto m = r.get_u32_opt(A + "diffusion.mask_token_id")) hp.mask_token = static_cast<int>(*m);

  return hp;
}

}  // namespace clover::model
