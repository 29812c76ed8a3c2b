// The engine API (include/clover/clover.h) on top of the model library: loading, sessions with
// prefix reuse, and the autoregressive generation loop.
#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <thread>

#include "clover/clover.h"
#include "engine/stop_strings.h"
#include "gguf/gguf.h"
#include "model/forward.h"
#include "model/model.h"
#include "decode/decoders.h"
#include "sampling/sampler.h"

namespace clover {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kMaxContext = 131072;
// Positions past the context that a block pass may use as scratch (a block near the end of the
// context still has all its positions).
constexpr int kMaxBlock = 256;

sampling::SamplingParams to_params(const SamplingOptions& o) {
  sampling::SamplingParams p;
  p.temperature = o.temperature;
  p.top_k = o.top_k;
  p.top_p = o.top_p;
  p.min_p = o.min_p;
  p.presence_penalty = o.presence_penalty;
  p.frequency_penalty = o.frequency_penalty;
  p.repeat_penalty = o.repeat_penalty;
  p.repeat_last_n = o.repeat_last_n;
  p.seed = o.seed;
  return p;
}

class EngineImpl;
DType to_dtype(CacheType t);

class SessionImpl final : public Session {
 public:
  SessionImpl(EngineImpl& eng);
  int n_past() const override { return state_.n_past; }
  int n_ctx() const override { return n_ctx_; }
  void reset() override {
    state_.reset();
    history_.clear();
  }
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_positions) override;
  std::vector<float> denoise(std::span<const int32_t> block, bool reverse_path) override;
  Event generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const EventFn& on_event) override;

 private:
  EngineImpl& eng_;
  model::SequenceState state_;
  std::vector<int32_t> history_;  // tokens in the state
  int n_ctx_;                      // the context offered to requests (the state has block scratch beyond it)
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::unique_ptr<model::Model> m, const EngineOptions& opts)
      : model_(std::move(m)),
        pool_(opts.n_threads > 0 ? opts.n_threads : std::max(1u, std::thread::hardware_concurrency())),
        forward_(*model_, pool_, opts.max_batch) {
    const model::HParams& hp = model_->hp();
    if (!opts.routing_trace.empty()) {
      trace_ = std::fopen(opts.routing_trace.c_str(), "w");
      if (!trace_) throw Error("cannot write " + opts.routing_trace);
      forward_.trace_routing(trace_);
    }
    n_ctx_ = opts.n_ctx > 0 ? opts.n_ctx : std::min(hp.n_ctx_train, kMaxContext);
    kv_types_ = {to_dtype(opts.cache_type_k), to_dtype(opts.cache_type_v)};
    describe_context(opts);
    info_.path = model_->file().path();
    info_.architecture = hp.arch;
    info_.layout = model::layout_name(hp.layout);
    info_.n_layer = hp.n_layer;
    info_.n_attn_layers = hp.n_attn_layers();
    info_.n_gdn_layers = hp.n_gdn_layers();
    info_.n_embd = hp.n_embd;
    info_.n_vocab = hp.n_vocab;
    info_.n_ctx_train = hp.n_ctx_train;
    info_.n_expert = hp.n_expert;
    info_.n_expert_used = hp.n_expert_used;
    for (const auto& t : model_->file().tensors()) info_.n_params += static_cast<uint64_t>(t.n_elements());
    info_.file_bytes = model_->file().file_size();
    info_.can_denoise = hp.has_reverse_path;
    info_.block_size = hp.block_size;
    info_.threshold = hp.threshold;
    info_.mask_token = hp.mask_token;
    info_.warnings = model_->warnings();
  }

  ~EngineImpl() override {
    if (trace_) std::fclose(trace_);
  }

  const ModelInfo& info() const override { return info_; }
  int n_threads() const override { return pool_.size(); }
  std::unique_ptr<Session> new_session() override { return std::make_unique<SessionImpl>(*this); }

  std::vector<int32_t> tokenize(std::string_view text, bool parse_special) const override {
    return model_->tokenizer().encode(text, parse_special);
  }
  std::string detokenize(std::span<const int32_t> tokens) const override {
    return model_->tokenizer().decode(std::vector<int32_t>(tokens.begin(), tokens.end()));
  }
  std::string token_text(int32_t token) const override { return model_->tokenizer().token_bytes(token); }
  bool is_end_token(int32_t token) const override { return model_->tokenizer().is_eog(token); }
  const std::string& chat_template() const override { return model_->chat_template(); }

  const model::Model& model() const { return *model_; }
  model::Forward& forward() { return forward_; }
  int n_ctx() const { return n_ctx_; }
  model::KvTypes kv_types() const { return kv_types_; }

 private:
  void describe_context(const EngineOptions& opts);

  std::unique_ptr<model::Model> model_;
  ThreadPool pool_;
  model::Forward forward_;
  int n_ctx_ = 0;
  model::KvTypes kv_types_;
  ModelInfo info_;
  std::FILE* trace_ = nullptr;
};

SessionImpl::SessionImpl(EngineImpl& eng)
    : eng_(eng), state_(eng.model().hp(), eng.n_ctx() + kMaxBlock, eng.kv_types()), n_ctx_(eng.n_ctx()) {}

// --- Context and KV cache types (docs/long-context.md) ---

DType to_dtype(CacheType t) { return t == CacheType::F32 ? DType::F32 : t == CacheType::F16 ? DType::F16 : DType::Q8_0; }

// Checks the cache types against the model (q8_0 needs a head dim that is a multiple of 32) and
// records the context and its memory in info_, before any session allocates it.
void EngineImpl::describe_context(const EngineOptions& opts) {
  const model::HParams& hp = model_->hp();
  try {
    model::SequenceState::check_kv_types(hp, kv_types_);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  info_.recurrent_state_bytes = model::SequenceState::recurrent_bytes_for(hp);
  info_.n_ctx = n_ctx_;
  info_.cache_type_k = std::string(cache_type_name(opts.cache_type_k));
  info_.cache_type_v = std::string(cache_type_name(opts.cache_type_v));
  info_.kv_cache_bytes = model::SequenceState::kv_bytes_for(hp, n_ctx_ + kMaxBlock, kv_types_);
}

std::vector<float> SessionImpl::eval(std::span<const int32_t> tokens, bool all_positions) {
  const int n_vocab = eng_.model().hp().n_vocab;
  if (state_.n_past + static_cast<int64_t>(tokens.size()) > n_ctx_)
    throw Error(fmt::format("context full: {} cached + {} new tokens exceed the context of {}", state_.n_past, tokens.size(), n_ctx_));
  std::vector<float> logits(static_cast<size_t>(all_positions ? tokens.size() : 1) * n_vocab);
  try {
    eng_.forward().causal(state_, tokens, all_positions ? model::LogitRows::All : model::LogitRows::Last, logits.data());
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  return logits;
}

std::vector<float> SessionImpl::denoise(std::span<const int32_t> block, bool reverse_path) {
  std::vector<float> logits(block.size() * static_cast<size_t>(eng_.model().hp().n_vocab));
  try {
    eng_.forward().denoise(state_, block, logits.data(), reverse_path);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  return logits;
}

Event SessionImpl::generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const EventFn& on_event) {
  const model::Model& m = eng_.model();
  const int n_vocab = m.hp().n_vocab;
  if (prompt.empty()) throw Error("the prompt is empty");
  if (opts.max_tokens < 0) throw Error(fmt::format("max_tokens must be >= 0 (got {})", opts.max_tokens));
  if (static_cast<int64_t>(prompt.size()) + opts.max_tokens > n_ctx_)
    throw Error(fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the context size ({} tokens)", prompt.size(),
                            opts.max_tokens, n_ctx_));

  if (opts.mode != DecodeMode::AR) {
    const model::HParams& hp = m.hp();
    if (!hp.has_reverse_path)
      throw Error("this model file has no reverse in-block GDN path (ssm_rev_* tensors, official layout only): "
                  "diffusion and spec modes need it; use mode ar");
    if (hp.mask_token < 0) throw Error("this model has no <|mask|> token: diffusion and spec modes need one");
    const int B = opts.block_size > 0 ? opts.block_size : hp.block_size;
    if (B < 2 || B > kMaxBlock) throw Error(fmt::format("block size {} is out of range [2, {}]", B, kMaxBlock));
  }

  // Reuse the cached prefix when the session's history is a strict prefix of the prompt (the
  // recurrent state cannot be rewound, so anything else starts over).
  Event done;
  const bool reusable = !history_.empty() && history_.size() < prompt.size() &&
                        std::equal(history_.begin(), history_.end(), prompt.begin());
  if (!reusable) reset();
  done.stats.cached_tokens = static_cast<int>(history_.size());
  const auto t0 = Clock::now();
  std::vector<float> logits = eval(prompt.subspan(history_.size()), false);
  done.stats.prompt_tokens = static_cast<int>(prompt.size()) - done.stats.cached_tokens;
  done.stats.prompt_seconds = seconds_since(t0);

  sampling::Sampler sampler(to_params(opts.sampling), n_vocab);
  text::Tokenizer::StreamDecoder decoder(m.tokenizer(), false);
  engine::StopStrings stops(opts.stop);
  int generated = 0;
  bool cancelled = false, ended = false;
  const auto t1 = Clock::now();

  // Every output token goes through here, in order, in every mode.
  decode::Emit emit = [&](int32_t tok) {
    ++generated;
    const bool end = !opts.ignore_eos && m.tokenizer().is_eog(tok);
    Event ev;
    ev.tokens = {tok};
    if (!end) ev.text = stops.push(decoder.push(tok));
    ended = end || stops.stopped();
    if (!on_event(ev)) cancelled = true;
    return !ended && !cancelled;
  };

  decode::Stats ds;
  if (opts.max_tokens > 0) {
    decode::Options o;
    o.max_tokens = opts.max_tokens;
    o.block_size = opts.block_size > 0 ? opts.block_size : m.hp().block_size;
    o.threshold = opts.threshold >= 0 ? static_cast<double>(opts.threshold) : static_cast<double>(m.hp().threshold);
    o.mask_token = m.hp().mask_token;
    o.reverse_path = m.hp().has_reverse_path;
    if (opts.on_block)
      o.observer = [&](const std::vector<int32_t>& block, const std::vector<bool>& decided, int pass) {
        opts.on_block(BlockEvent{block, decided, pass});
      };
    decode::Context ctx{eng_.forward(), state_, sampler, history_};
    const int32_t pending = sampler.sample(logits.data(), history_).token;
    switch (opts.mode) {
      case DecodeMode::AR: decode::decode_ar(ctx, pending, o, emit, ds); break;
      case DecodeMode::Diffusion: decode::decode_diffusion(ctx, pending, o, emit, ds); break;
      case DecodeMode::Spec: decode::decode_spec(ctx, pending, o, emit, ds); break;
    }
  }
  FinishReason finish = ended || cancelled ? FinishReason::Stop : FinishReason::Length;
  if (!stops.stopped()) {
    done.text = stops.push(decoder.flush());
    if (stops.stopped()) finish = FinishReason::Stop;
    else done.text += stops.flush();
  }
  done.stats.generated_tokens = generated;
  done.stats.generate_seconds = seconds_since(t1);
  done.stats.passes = ds.causal_passes + ds.denoise_passes;
  done.stats.denoise_passes = ds.denoise_passes;
  done.stats.blocks = ds.blocks;
  done.stats.denoise_seconds = ds.denoise_seconds;
  done.finish = finish;
  on_event(done);
  return done;
}

}  // namespace

std::unique_ptr<Engine> Engine::load(const std::string& path, const EngineOptions& opts) {
  try {
    model::LoadOptions lo;
    lo.prefault = opts.prefault;
    auto m = model::Model::load(path, lo);
    return std::make_unique<EngineImpl>(std::move(m), opts);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

// --- KV cache type names (clover.h) ---

std::string_view cache_type_name(CacheType t) { return t == CacheType::F32 ? "f32" : t == CacheType::F16 ? "f16" : "q8_0"; }

CacheType cache_type_from_name(std::string_view name) {
  for (CacheType t : {CacheType::F32, CacheType::F16, CacheType::Q8_0}) {
    const std::string_view n = cache_type_name(t);
    if (n.size() == name.size() &&
        std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) { return a == (b >= 'A' && b <= 'Z' ? b - 'A' + 'a' : b); }))
      return t;
  }
  throw Error(fmt::format("unknown KV cache type \"{}\" (use f32, f16 or q8_0)", name));
}

std::string context_summary(const ModelInfo& info) {
  auto size = [](uint64_t b) {
    if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / 1073741824.0);
    if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / 1048576.0);
    return fmt::format("{:.1f} KiB", b / 1024.0);
  };
  return fmt::format("context {} tokens, KV cache {}/{} {} per session, recurrent state {}", info.n_ctx, info.cache_type_k,
                     info.cache_type_v, size(info.kv_cache_bytes), size(info.recurrent_state_bytes));
}

}  // namespace clover
