#include "synth/synth.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/convert.h"
#include "quantize/mixture.h"
#include "runtime/thread_pool.h"
#include "synth/random.h"
#include "synth/vocab.h"

namespace clover::synth {

SynthConfig preset(std::string_view name) {
  SynthConfig c;
  if (name == "tiny") return c;
  if (name == "mid") {
    c.n_layer = 8, c.n_embd = 1024, c.n_vocab = 32000;
    c.n_head = 8, c.n_head_kv = 2, c.head_dim = 128, c.n_rot = 32;
    c.gdn_k_heads = 8, c.gdn_v_heads = 16, c.gdn_head_dim = 64;
    c.n_expert = 64, c.n_expert_used = 8, c.n_ff_exp = 256, c.n_ff_shexp = 256;
    c.n_ctx_train = 262144;
    return c;
  }
  if (name == "clover-35b" || name == "slice") {
    c.n_layer = name == "slice" ? 4 : 40, c.n_embd = 2048, c.n_vocab = 248320;
    c.n_head = 16, c.n_head_kv = 2, c.head_dim = 256, c.n_rot = 64;
    c.gdn_k_heads = 16, c.gdn_v_heads = 32, c.gdn_head_dim = 128;
    c.n_expert = 256, c.n_expert_used = 8, c.n_ff_exp = 512, c.n_ff_shexp = 512;
    c.n_ctx_train = 262144;
    c.name = name == "slice" ? "clover-35b-slice" : "clover-35b-synth";
    return c;
  }
  throw std::invalid_argument(fmt::format("unknown preset '{}' (tiny, mid, slice, clover-35b)", name));
}

std::string expand_pattern(const SynthConfig& cfg) {
  if (cfg.layer_pattern.empty() || cfg.layer_pattern.find_first_not_of("LF") != std::string::npos)
    throw std::invalid_argument(fmt::format("layer pattern '{}' must be a non-empty string of L and F", cfg.layer_pattern));
  std::string p;
  for (int i = 0; i < cfg.n_layer; ++i) p += cfg.layer_pattern[i % cfg.layer_pattern.size()];
  return p;
}

namespace {

// How a tensor part's values are drawn.
enum class Dist { Normal, NormWeight, ALog, DtBias };

// A contiguous run of a tensor's values from one random stream.
struct Part {
  std::string stream;  // stream name (the unfused tensor's name)
  uint64_t index = 0;  // expert index for stacked tensors
  int64_t count = 0;
  Dist dist = Dist::Normal;
  float scale = 1.f;
};

struct TensorPlan {
  std::string name;
  std::vector<int64_t> dims;
  DType type;
  std::vector<Part> parts;
  bool a_log_as_is = false;  // ALog parts: store A_log (official) instead of -exp(A_log)
};

float draw(Stream& s, const Part& p, bool a_log_as_is) {
  switch (p.dist) {
    case Dist::Normal: return s.normal() * p.scale;
    case Dist::NormWeight: return 1.0f + 0.1f * s.normal();
    case Dist::ALog: {
      const float a_log = static_cast<float>(std::log(1.0 + 15.0 * s.uniform()));  // A in [1, 16)
      return a_log_as_is ? a_log : -std::exp(a_log);
    }
    case Dist::DtBias: {
      const double dt = std::exp(std::log(1e-3) + s.uniform() * (std::log(1e-1) - std::log(1e-3)));
      return static_cast<float>(dt + std::log(-std::expm1(-dt)));  // inverse softplus
    }
  }
  return 0.f;
}

uint32_t file_type_of(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::IQ4_NL: return 25;
    case DType::IQ4_XS: return 30;
    case DType::Q8_0: return 7;
    case DType::BF16: return 32;
    case DType::Q2_K: return 10;  // LLAMA_FTYPE_MOSTLY_Q2_K
    case DType::Q3_K: return 11;  // MOSTLY_Q3_K_S: mostly Q3_K
    case DType::Q4_K: return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S: mostly Q4_K
    case DType::Q5_K: return 16;  // MOSTLY_Q5_K_S
    case DType::Q6_K: return 18;  // MOSTLY_Q6_K
    default: return 0;
  }
  return 0;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

class Planner {
 public:
  explicit Planner(const SynthConfig& c) : c_(c) {}

  void matrix(const std::string& name, int64_t cols, int64_t rows, DType t) {
    add({name, {cols, rows}, t, {{name, 0, cols * rows, Dist::Normal, 1.0f / std::sqrt(static_cast<float>(cols))}}});
  }
  // A matrix made of several named blocks of rows (fused tensors keep their parts' streams).
  void fused(const std::string& name, int64_t cols, const std::vector<std::pair<std::string, int64_t>>& blocks, DType t) {
    TensorPlan p{name, {cols, 0}, t, {}};
    for (const auto& [stream, rows] : blocks) {
      p.parts.push_back({stream, 0, cols * rows, Dist::Normal, 1.0f / std::sqrt(static_cast<float>(cols))});
      p.dims[1] += rows;
    }
    add(std::move(p));
  }
  void vec(const std::string& name, std::vector<int64_t> dims, Dist d, float scale = 1.f, bool a_log_as_is = false) {
    int64_t n = 1;
    for (int64_t x : dims) n *= x;
    TensorPlan p{name, dims, DType::F32, {{name, 0, n, d, scale}}};
    p.a_log_as_is = a_log_as_is;
    add(std::move(p));
  }
  // {cols, rows, n_expert}; `streams` lists the (stream name, rows) blocks of each expert.
  void experts(const std::string& name, int64_t cols, const std::vector<std::pair<std::string, int64_t>>& blocks, DType t) {
    TensorPlan p{name, {cols, 0, c_.n_expert}, t, {}};
    for (const auto& b : blocks) p.dims[1] += b.second;
    for (int e = 0; e < c_.n_expert; ++e)
      for (const auto& [stream, rows] : blocks)
        p.parts.push_back({stream, static_cast<uint64_t>(e), cols * rows, Dist::Normal, 1.0f / std::sqrt(static_cast<float>(cols))});
    add(std::move(p));
  }

  std::vector<TensorPlan> plans;

 private:
  void add(TensorPlan p) {
    const int64_t bs = dtype_block_size(p.type);
    check(p.dims[0] % bs == 0, fmt::format("tensor {}: row length {} is not a multiple of the {} block size {}", p.name, p.dims[0],
                                           dtype_name(p.type), bs));
    plans.push_back(std::move(p));
  }
  const SynthConfig& c_;
};

std::vector<TensorPlan> plan_tensors(const SynthConfig& c, const std::string& pattern) {
  Planner P(c);
  const bool official = c.layout == model::Layout::Official;
  const int64_t E = c.n_embd, hd = c.head_dim, d = c.gdn_head_dim, Hv = c.gdn_v_heads;
  const int64_t qkv_dim = 2 * c.gdn_k_heads * d + Hv * d;
  const DType embd_t = c.embd_type_set ? c.embd_type : c.type;
  const DType out_t = c.output_type_set ? c.output_type : c.type;
  // Embeddings are N(0, 1) (no 1/sqrt(fan_in): their rows are the residual stream's start).
  P.plans.push_back({"token_embd.weight", {E, c.n_vocab}, embd_t, {{"token_embd.weight", 0, E * c.n_vocab, Dist::Normal, 1.0f}}});
  P.vec("output_norm.weight", {E}, Dist::NormWeight);
  if (!c.tie_output) P.matrix("output.weight", E, c.n_vocab, out_t);
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    P.vec(p + "attn_norm.weight", {E}, Dist::NormWeight);
    P.vec(p + "post_attention_norm.weight", {E}, Dist::NormWeight);
    if (pattern[il] == 'F') {
      const int64_t nq = 2 * c.n_head * hd, nkv = c.n_head_kv * hd;
      if (c.fuse_qkv)
        P.fused(p + "attn_qkv.weight", E, {{p + "attn_q.weight", nq}, {p + "attn_k.weight", nkv}, {p + "attn_v.weight", nkv}}, c.type);
      else {
        P.matrix(p + "attn_q.weight", E, nq, c.type);
        P.matrix(p + "attn_k.weight", E, nkv, c.type);
        P.matrix(p + "attn_v.weight", E, nkv, c.type);
      }
      P.matrix(p + "attn_output.weight", c.n_head * hd, E, c.type);
      P.vec(p + "attn_q_norm.weight", {hd}, Dist::NormWeight);
      P.vec(p + "attn_k_norm.weight", {hd}, Dist::NormWeight);
    } else {
      P.matrix(p + "attn_qkv.weight", E, qkv_dim, c.type);
      P.matrix(p + "attn_gate.weight", E, Hv * d, c.type);
      P.vec(p + "ssm_conv1d.weight", {c.conv_kernel, qkv_dim}, Dist::Normal, 1.0f / std::sqrt(static_cast<float>(c.conv_kernel)));
      P.vec(p + "ssm_dt.bias", {Hv}, Dist::DtBias);
      P.vec(p + "ssm_a", {Hv}, Dist::ALog, 1.f, official);
      P.matrix(p + "ssm_beta.weight", E, Hv, c.type);
      P.matrix(p + "ssm_alpha.weight", E, Hv, c.type);
      P.vec(p + "ssm_norm.weight", {d}, Dist::NormWeight);
      P.matrix(p + "ssm_out.weight", Hv * d, E, c.type);
      if (official) {
        P.matrix(p + "ssm_rev_alpha.weight", E, Hv, c.type);
        P.matrix(p + "ssm_rev_beta.weight", E, Hv, c.type);
        P.vec(p + "ssm_rev_dt.bias", {Hv}, Dist::DtBias);
        P.vec(p + "ssm_rev_a", {Hv}, Dist::ALog, 1.f, true);
      }
    }
    P.matrix(p + "ffn_gate_inp.weight", E, c.n_expert, DType::F32);
    if (c.fuse_gate_up)
      P.experts(p + "ffn_gate_up_exps.weight", E, {{p + "ffn_gate_exps.weight", c.n_ff_exp}, {p + "ffn_up_exps.weight", c.n_ff_exp}}, c.type);
    else {
      P.experts(p + "ffn_gate_exps.weight", E, {{p + "ffn_gate_exps.weight", c.n_ff_exp}}, c.type);
      P.experts(p + "ffn_up_exps.weight", E, {{p + "ffn_up_exps.weight", c.n_ff_exp}}, c.type);
    }
    P.experts(p + "ffn_down_exps.weight", c.n_ff_exp, {{p + "ffn_down_exps.weight", E}}, c.type);
    P.matrix(p + "ffn_gate_inp_shexp.weight", E, 1, DType::F32);
    P.matrix(p + "ffn_gate_shexp.weight", E, c.n_ff_shexp, c.type);
    P.matrix(p + "ffn_up_shexp.weight", E, c.n_ff_shexp, c.type);
    P.matrix(p + "ffn_down_shexp.weight", c.n_ff_shexp, E, c.type);
  }
  return std::move(P.plans);
}

// A preset's types for every tensor, as `clover quantize` would choose them for this model in F32.
void apply_mixture(const SynthConfig& c, std::vector<TensorPlan>& plans, uint32_t* file_type) {
  const auto preset = quantize::preset_from_name(c.mixture);
  check(preset.has_value(), fmt::format("unknown preset '{}' (supported: {})", c.mixture, quantize::preset_names()));
  std::vector<quantize::TensorDesc> descs;
  for (const auto& p : plans) descs.push_back({p.name, p.dims, DType::F32});
  const std::vector<DType> types = quantize::plan_types(*preset, descs, c.n_layer, c.n_expert, c.n_head_kv > 0 ? c.n_head / c.n_head_kv : 1);
  for (size_t i = 0; i < plans.size(); ++i) plans[i].type = types[i];
  *file_type = preset->file_type;
}

void validate(const SynthConfig& c) {
  check(c.n_layer >= 1 && c.n_layer <= 512, "n_layer must be in [1, 512]");
  check(c.n_embd >= 1 && c.n_vocab >= 1 && c.n_head >= 1 && c.n_head_kv >= 1 && c.head_dim >= 2, "dimensions must be positive");
  check(c.n_head % c.n_head_kv == 0, fmt::format("heads {} must be a multiple of kv heads {}", c.n_head, c.n_head_kv));
  check(c.n_rot >= 2 && c.n_rot % 2 == 0 && c.n_rot <= c.head_dim, "rope dims must be even and at most the head size");
  check(c.gdn_k_heads >= 1 && c.gdn_v_heads % c.gdn_k_heads == 0, "GDN value heads must be a multiple of key heads");
  check(c.conv_kernel >= 1 && c.gdn_head_dim >= 1, "GDN sizes must be positive");
  check(c.n_expert >= 1 && c.n_expert_used >= 1 && c.n_expert_used <= c.n_expert, "experts used must be in [1, experts]");
  check(c.n_ff_exp >= 1 && c.n_ff_shexp >= 1, "expert FFN sizes must be positive");
  check(c.block_size >= 2, "block size must be at least 2");
}

}  // namespace

uint64_t TensorShape::bytes() const {
  uint64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= static_cast<uint64_t>(dims[i]);
  return rows * dtype_row_bytes(type, dims[0]);
}

std::vector<TensorShape> tensor_shapes(const SynthConfig& cfg) {
  validate(cfg);
  std::vector<TensorPlan> plans = plan_tensors(cfg, expand_pattern(cfg));
  uint32_t file_type = 0;
  if (!cfg.mixture.empty()) apply_mixture(cfg, plans, &file_type);
  std::vector<TensorShape> out;
  for (const TensorPlan& p : plans) out.push_back({p.name, p.dims, p.type});
  return out;
}

model::HParams hparams_of(const SynthConfig& c) {
  validate(c);
  model::HParams hp;
  hp.arch = c.layout == model::Layout::Qwen35Moe ? "qwen35moe" : "clover_moe";
  hp.layout = c.layout;
  hp.n_layer = c.n_layer;
  for (char ch : expand_pattern(c)) hp.recurrent.push_back(ch == 'L');
  hp.n_embd = c.n_embd, hp.n_vocab = c.n_vocab, hp.n_ctx_train = c.n_ctx_train, hp.rms_eps = c.rms_eps;
  hp.n_head = c.n_head, hp.n_head_kv = c.n_head_kv, hp.head_dim = c.head_dim, hp.n_rot = c.n_rot, hp.rope_theta = c.rope_theta;
  hp.gdn_k_heads = c.gdn_k_heads, hp.gdn_v_heads = c.gdn_v_heads, hp.gdn_head_dim = c.gdn_head_dim, hp.conv_kernel = c.conv_kernel;
  hp.n_expert = c.n_expert, hp.n_expert_used = c.n_expert_used, hp.n_ff_exp = c.n_ff_exp, hp.n_ff_shexp = c.n_ff_shexp;
  hp.block_size = c.block_size, hp.threshold = c.threshold;
  hp.has_reverse_path = c.layout == model::Layout::Official;
  return hp;
}

void write_model(const SynthConfig& cfg, const std::string& path, const ProgressFn& progress) {
  SynthConfig c = cfg;
  validate(c);
  const std::string pattern = expand_pattern(c);
  text::VocabData vocab = c.vocab_hf_json.empty() ? synthetic_vocab(c.n_vocab) : hf_vocab(c.vocab_hf_json);
  c.n_vocab = static_cast<int>(vocab.tokens.size());
  const int32_t mask_id = [&] {
    for (size_t i = 0; i < vocab.tokens.size(); ++i)
      if (vocab.tokens[i] == "<|mask|>") return static_cast<int32_t>(i);
    return -1;
  }();

  const std::string arch = c.layout == model::Layout::Qwen35Moe ? "qwen35moe" : "clover_moe";
  const std::string A = arch + ".";
  gguf::Writer w(path);
  using gguf::Value;
  w.set("general.architecture", Value::str(arch));
  w.set("general.name", Value::str(c.name));
  uint32_t file_type = file_type_of(c.type);
  w.set("general.file_type", Value::u32(file_type));
  w.set(A + "context_length", Value::u32(c.n_ctx_train));
  w.set(A + "embedding_length", Value::u32(c.n_embd));
  w.set(A + "block_count", Value::u32(c.n_layer));
  w.set(A + "expert_count", Value::u32(c.n_expert));
  w.set(A + "expert_used_count", Value::u32(c.n_expert_used));
  if (c.layout == model::Layout::LlamaClover) w.set(A + "expert_shared_count", Value::u32(1));
  w.set(A + "attention.head_count", Value::u32(c.n_head));
  w.set(A + "attention.head_count_kv", Value::u32(c.n_head_kv));
  w.set(A + "attention.key_length", Value::u32(c.head_dim));
  w.set(A + "attention.value_length", Value::u32(c.head_dim));
  w.set(A + "rope.dimension_count", Value::u32(c.n_rot));
  w.set(A + "rope.freq_base", Value::f32(c.rope_theta));
  const int pairs = c.n_rot / 2;  // M-RoPE sections that give every rotary pair a text position
  w.set(A + "rope.dimension_sections", Value::i32_array({(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0}));
  w.set(A + "attention.layer_norm_rms_epsilon", Value::f32(c.rms_eps));
  w.set(A + "expert_feed_forward_length", Value::u32(c.n_ff_exp));
  w.set(A + "expert_shared_feed_forward_length", Value::u32(c.n_ff_shexp));
  w.set(A + "ssm.conv_kernel", Value::u32(c.conv_kernel));
  w.set(A + "ssm.inner_size", Value::u32(c.gdn_v_heads * c.gdn_head_dim));
  w.set(A + "ssm.state_size", Value::u32(c.gdn_head_dim));
  w.set(A + "ssm.time_step_rank", Value::u32(c.gdn_v_heads));
  w.set(A + "ssm.group_count", Value::u32(c.gdn_k_heads));
  if (c.recurrent_key) {
    std::vector<bool> rec;
    for (char ch : pattern) rec.push_back(ch == 'L');
    w.set(A + "attention.recurrent_layers", Value::bool_array(rec));
  } else {
    // Only valid when the pattern is "every interval-th layer is attention".
    const size_t interval = pattern.find('F') + 1;
    for (size_t i = 0; i < pattern.size(); ++i)
      check((pattern[i] == 'F') == ((i + 1) % interval == 0),
            fmt::format("layer pattern {} cannot be expressed by full_attention_interval alone", pattern));
  }
  w.set(A + "full_attention_interval", Value::u32(static_cast<uint32_t>(std::max<size_t>(1, pattern.find('F') + 1))));
  w.set(A + "diffusion.block_size", Value::u32(c.block_size));
  w.set(A + "diffusion.threshold", Value::f32(c.threshold));
  if (mask_id >= 0) w.set(A + "diffusion.mask_token_id", Value::u32(mask_id));
  write_vocab(w, vocab);
  w.set("tokenizer.chat_template", Value::str(std::string(qwen35_chat_template())));

  std::vector<TensorPlan> plans = plan_tensors(c, pattern);
  if (!c.mixture.empty()) {
    apply_mixture(c, plans, &file_type);
    w.set("general.file_type", Value::u32(file_type));  // replaces the value set above, in place
    w.set("general.quantization_version", Value::u32(2));  // as llama-quantize (and clover quantize) write it
  }
  uint64_t total = 0;
  for (const auto& p : plans) {
    w.add_tensor(p.name, p.dims, p.type);
    total += w.tensor_bytes(p.name);
  }
  w.begin_data();

  // Values come in blocks of whole rows (about 64K values), each block from its own stream, so
  // blocks can be drawn in parallel and a value never depends on the storage type or the chunking.
  // Chunks of blocks are converted and written in order: memory stays at a few tens of MiB.
  ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::vector<float> vals;
  std::vector<uint8_t> bytes;
  uint64_t done = 0;
  for (const auto& p : plans) {
    const int64_t cols = p.dims[0];
    const size_t row_bytes = dtype_row_bytes(p.type, cols);
    const int64_t rows_per_block = std::max<int64_t>(1, 65536 / cols);
    const int64_t blocks_per_chunk = 32;
    bool first = true;
    for (const Part& part : p.parts) {
      const int64_t rows = part.count / cols;
      const int64_t n_blocks = (rows + rows_per_block - 1) / rows_per_block;
      for (int64_t b0 = 0; b0 < n_blocks; b0 += blocks_per_chunk) {
        const int64_t b1 = std::min(n_blocks, b0 + blocks_per_chunk);
        const int64_t r0 = b0 * rows_per_block, r1 = std::min(rows, b1 * rows_per_block);
        vals.resize(static_cast<size_t>((r1 - r0) * cols));
        bytes.resize(row_bytes * static_cast<size_t>(r1 - r0));
        pool.parallel_for(b1 - b0, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t blk = b0 + lo; blk < b0 + hi; ++blk) {
            Stream s(c.seed, part.stream, (part.index << 32) + static_cast<uint64_t>(blk));
            const int64_t br0 = blk * rows_per_block, br1 = std::min(rows, br0 + rows_per_block);
            float* v = vals.data() + (br0 - r0) * cols;
            for (int64_t i = 0; i < (br1 - br0) * cols; ++i) v[i] = draw(s, part, p.a_log_as_is);
            for (int64_t r = br0; r < br1; ++r)
              kernels::quantize_row(p.type, vals.data() + (r - r0) * cols, bytes.data() + (r - r0) * row_bytes, cols);
          }
        });
        if (first) {
          w.write_tensor_data(p.name, bytes.data(), bytes.size());
          first = false;
        } else {
          w.append_tensor_data(bytes.data(), bytes.size());
        }
        done += bytes.size();
        if (progress) progress(done, total);
      }
    }
  }
  w.finish();
}

}  // namespace clover::synth
