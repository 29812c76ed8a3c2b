// The engine API (include/clover/clover.h) on top of the model library: loading, sessions with
// prefix reuse, and the autoregressive generation loop.
#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include "clover/clover.h"
#include "backend/executor.h"
#include "backend/placement.h"
#include "decode/decoders.h"
#include "engine/pass_batcher.h"
#include "engine/stop_strings.h"
#include "engine/weight_residency.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace clover {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kMaxContext = 131072;
// Positions past the context that a block pass may use as scratch (a block near the end of the
// context still has all its positions).
constexpr int kMaxBlock = 256;
// Alternatives per token that logprobs may ask for (OpenAI's top_logprobs limit).
constexpr int kMaxLogprobs = 20;

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
  p.logit_bias = o.logit_bias;
  return p;
}

class EngineImpl;
DType to_dtype(CacheType t);

class SessionImpl final : public Session {
 public:
  SessionImpl(EngineImpl& eng);
  int n_past() const override { return seq_->n_past(); }
  int n_ctx() const override { return n_ctx_; }
  void reset() override {
    seq_->reset();
    history_.clear();
    snapshots_.clear();
  }
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_positions) override;
  std::vector<float> denoise(std::span<const int32_t> block, bool reverse_path, std::span<const int32_t> rows) override;
  std::vector<TopToken> eval_top(std::span<const int32_t> tokens, int k) override;
  std::vector<std::vector<TopToken>> denoise_top(std::span<const int32_t> block, std::span<const int32_t> rows, int k,
                                                 bool reverse_path) override;
  PassStats last_pass() const override { return last_pass_; }
  int reusable_prefix(std::span<const int32_t> prompt) const override;
  Event generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const EventFn& on_event) override;

 private:
  // Snapshots of the recurrent state after the first n_past() tokens of history_ (the attention
  // cache needs no copy: its rows up to there are still those of that prefix as long as history_
  // starts with it).
  using Snapshot = std::unique_ptr<backend::Snapshot>;
  // The longest reusable prefix: all of history_ when it is a strict prefix of the prompt
  // (snapshot -1), else the longest snapshot that is (its index).
  std::pair<int, int> best_prefix(std::span<const int32_t> prompt) const;
  void take_snapshot();
  // Passes of this session, through the engine's batcher; the caller is a participant. Long
  // causal passes go in chunks of max_batch; p.stats sums them. Records the pass as last_pass_.
  void run_pass(backend::Pass& p);
  std::vector<float> eval_batched(std::span<const int32_t> tokens, bool all_positions);
  // A causal pass of `tokens` (the context checked; they join the history) and a denoising pass of
  // `block` (nothing committed), with logits and/or a top-k selection per row as the Pass asks;
  // backend errors become Error.
  void causal_pass(std::span<const int32_t> tokens, backend::LogitRows rows, float* logits, int top_k, sampling::RowTop* top);
  void denoise_pass(std::span<const int32_t> block, std::span<const int32_t> rows, bool reverse_path, float* logits, int top_k,
                    sampling::RowTop* top);

  EngineImpl& eng_;
  std::unique_ptr<backend::Sequence> seq_;
  std::vector<int32_t> history_;     // tokens in the sequence
  std::vector<Snapshot> snapshots_;  // oldest first, at most EngineOptions::state_snapshots
  int n_ctx_;                        // the context offered to requests (the sequence has block scratch beyond it)
  PassStats last_pass_;              // this session's last pass, as its executor reported it
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::unique_ptr<model::Model> m, std::unique_ptr<backend::Executor> exec, const EngineOptions& opts)
      : model_(std::move(m)), executor_(std::move(exec)), batcher_(*executor_), snapshots_(std::max(0, opts.state_snapshots)) {
    const model::HParams& hp = model_->hp();
    if (!opts.routing_trace.empty()) {
      trace_ = std::fopen(opts.routing_trace.c_str(), "w");
      if (!trace_) throw Error("cannot write " + opts.routing_trace);
      executor_->trace_routing(trace_);
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
    std::map<DType, uint64_t> bytes_by_type;
    for (const auto& t : model_->file().tensors()) {
      info_.n_params += static_cast<uint64_t>(t.n_elements());
      bytes_by_type[t.type] += t.size;
    }
    if (!bytes_by_type.empty())
      info_.weight_type = std::string(dtype_name(
          std::max_element(bytes_by_type.begin(), bytes_by_type.end(), [](auto& a, auto& b) { return a.second < b.second; })->first));
    info_.file_bytes = model_->file().file_size();
    info_.can_denoise = hp.has_reverse_path;
    info_.device = std::string(executor_->name());
    info_.placement = executor_->placement();
    info_.device_memory_bytes = executor_->device_memory_bytes();
    info_.repacked_bytes = model_->repacked().bytes;
    info_.read_direct = model_->file().read_direct();
    info_.block_size = hp.block_size;
    info_.threshold = hp.threshold;
    info_.mask_token = hp.mask_token;
    info_.warnings = model_->warnings();
    residency_ = std::make_unique<engine::WeightResidency>(*model_, opts, executor_->reads_host_weights(), info_.warnings);
  }

  ~EngineImpl() override {
    residency_.reset();  // stops the pre-fault's thread while the weights are still there
    if (trace_) std::fclose(trace_);
  }

  const ModelInfo& info() const override { return info_; }
  int n_threads() const override { return executor_->n_threads(); }
  std::unique_ptr<Session> new_session() override { return std::make_unique<SessionImpl>(*this); }
  BatchingStats batching_stats() const override { return batcher_.stats(); }
  PrefaultStatus prefault_status() const override { return residency_->status(); }

  std::vector<int32_t> tokenize(std::string_view text, bool parse_special) const override {
    return model_->tokenizer().encode(text, parse_special);
  }
  std::string detokenize(std::span<const int32_t> tokens) const override {
    return model_->tokenizer().decode(std::vector<int32_t>(tokens.begin(), tokens.end()));
  }
  std::string token_text(int32_t token) const override { return model_->tokenizer().token_bytes(token); }
  std::vector<std::string> control_texts() const override { return model_->tokenizer().control_texts(); }
  bool is_end_token(int32_t token) const override { return model_->tokenizer().is_eog(token); }
  const std::string& chat_template() const override { return model_->chat_template(); }

  const model::Model& model() const { return *model_; }
  backend::Executor& executor() { return *executor_; }
  engine::PassBatcher& batcher() { return batcher_; }
  int n_ctx() const { return n_ctx_; }
  int snapshots() const { return snapshots_; }
  backend::KvTypes kv_types() const { return kv_types_; }

 private:
  void describe_context(const EngineOptions& opts);

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<backend::Executor> executor_;
  engine::PassBatcher batcher_;
  int snapshots_;
  int n_ctx_ = 0;
  backend::KvTypes kv_types_;
  ModelInfo info_;
  std::FILE* trace_ = nullptr;
  std::unique_ptr<engine::WeightResidency> residency_;  // last: destroyed before the model
};

SessionImpl::SessionImpl(EngineImpl& eng)
    : eng_(eng), seq_(eng.executor().new_sequence(eng.n_ctx() + kMaxBlock, eng.kv_types())), n_ctx_(eng.n_ctx()) {}

// --- Context and KV cache types (docs/long-context.md) ---

DType to_dtype(CacheType t) { return t == CacheType::F32 ? DType::F32 : t == CacheType::F16 ? DType::F16 : DType::Q8_0; }

// Checks the cache types against the model (q8_0 needs a head dim that is a multiple of 32) and
// records the context and its memory in info_, before any session allocates it.
void EngineImpl::describe_context(const EngineOptions& opts) {
  const model::HParams& hp = model_->hp();
  try {
    backend::check_kv_types(hp, kv_types_);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  info_.recurrent_state_bytes = backend::recurrent_bytes_for(hp);
  info_.n_ctx = n_ctx_;
  info_.cache_type_k = std::string(cache_type_name(opts.cache_type_k));
  info_.cache_type_v = std::string(cache_type_name(opts.cache_type_v));
  info_.kv_cache_bytes = backend::kv_bytes_for(hp, n_ctx_ + kMaxBlock, kv_types_);
}

void SessionImpl::run_pass(backend::Pass& p) {
  if (p.kind == backend::PassKind::Denoise || p.tokens.empty()) {
    eng_.batcher().run(p);  // an empty one fails with the executor's message
  } else {
    // Causal: in chunks of at most max_batch tokens (rows only from the chunks that need them).
    const int64_t T = static_cast<int64_t>(p.tokens.size()), max_batch = eng_.executor().max_batch();
    const int64_t V = eng_.model().hp().n_vocab;
    p.stats = {};
    for (int64_t b = 0; b < T; b += max_batch) {
      const int64_t n = std::min(max_batch, T - b);
      const backend::LogitRows rows =
          p.rows == backend::LogitRows::All ? backend::LogitRows::All : (b + n == T ? p.rows : backend::LogitRows::None);
      const bool all = p.rows == backend::LogitRows::All;
      backend::Pass chunk = backend::Pass::causal(*p.seq, p.tokens.subspan(b, n), rows,
                                                  all && p.logits ? p.logits + b * V : p.logits);
      chunk.top_k = p.top_k;  // selection on the backend: its rows chunk like the logits rows
      chunk.top = all && p.top ? p.top + b : p.top;
      eng_.batcher().run(chunk);
      p.stats += chunk.stats;
    }
  }
  last_pass_ = PassStats{p.stats.tokens, p.stats.expert_rows, p.stats.distinct_experts};
}

std::vector<float> SessionImpl::eval(std::span<const int32_t> tokens, bool all_positions) {
  eng_.model().check_file();
  engine::PassBatcher::Participant part(eng_.batcher());
  return eval_batched(tokens, all_positions);
}

void SessionImpl::causal_pass(std::span<const int32_t> tokens, backend::LogitRows rows, float* logits, int top_k,
                              sampling::RowTop* top) {
  if (seq_->n_past() + static_cast<int64_t>(tokens.size()) > n_ctx_)
    throw Error(fmt::format("context full: {} cached + {} new tokens exceed the context of {}", seq_->n_past(), tokens.size(), n_ctx_));
  try {
    backend::Pass p = backend::Pass::causal(*seq_, tokens, rows, logits);
    p.top_k = top_k, p.top = top;
    run_pass(p);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  history_.insert(history_.end(), tokens.begin(), tokens.end());
}

void SessionImpl::denoise_pass(std::span<const int32_t> block, std::span<const int32_t> rows, bool reverse_path, float* logits,
                               int top_k, sampling::RowTop* top) {
  try {
    backend::Pass p = backend::Pass::denoise(*seq_, block, rows, logits, reverse_path);
    p.top_k = top_k, p.top = top;
    run_pass(p);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

std::vector<float> SessionImpl::eval_batched(std::span<const int32_t> tokens, bool all_positions) {
  const int n_vocab = eng_.model().hp().n_vocab;
  std::vector<float> logits(static_cast<size_t>(all_positions ? tokens.size() : 1) * n_vocab);
  causal_pass(tokens, all_positions ? backend::LogitRows::All : backend::LogitRows::Last, logits.data(), 0, nullptr);
  return logits;
}

std::vector<float> SessionImpl::denoise(std::span<const int32_t> block, bool reverse_path, std::span<const int32_t> rows) {
  eng_.model().check_file();
  const size_t V = static_cast<size_t>(eng_.model().hp().n_vocab);
  std::vector<float> logits(block.size() * V);
  engine::PassBatcher::Participant part(eng_.batcher());
  denoise_pass(block, rows, reverse_path, logits.data(), 0, nullptr);
  if (!rows.empty()) {  // the requested rows, packed in order (rows[i] >= i: moving forward is safe)
    for (size_t i = 0; i < rows.size(); ++i)
      if (static_cast<size_t>(rows[i]) != i) std::copy_n(logits.begin() + rows[i] * V, V, logits.begin() + i * V);
    logits.resize(rows.size() * V);
  }
  return logits;
}

namespace {

std::vector<TopToken> top_tokens(const sampling::RowTop& t) {
  std::vector<TopToken> out;
  for (int i = 0; i < t.n; ++i) out.push_back({t.top[i].id, t.logprob(t.top[i].logit)});
  return out;
}

void check_top_k(int k) {
  if (k < 1 || k > sampling::kMaxTop) throw Error(fmt::format("top-k of {} (1..{})", k, sampling::kMaxTop));
}

}  // namespace

std::vector<TopToken> SessionImpl::eval_top(std::span<const int32_t> tokens, int k) {
  eng_.model().check_file();
  check_top_k(k);
  engine::PassBatcher::Participant part(eng_.batcher());
  sampling::RowTop top;
  causal_pass(tokens, backend::LogitRows::Last, nullptr, k, &top);
  return top_tokens(top);
}

std::vector<std::vector<TopToken>> SessionImpl::denoise_top(std::span<const int32_t> block, std::span<const int32_t> rows, int k,
                                                            bool reverse_path) {
  eng_.model().check_file();
  check_top_k(k);
  std::vector<sampling::RowTop> top(block.size());
  engine::PassBatcher::Participant part(eng_.batcher());
  denoise_pass(block, rows, reverse_path, nullptr, k, top.data());
  std::vector<std::vector<TopToken>> out;
  if (rows.empty())
    for (const sampling::RowTop& t : top) out.push_back(top_tokens(t));
  for (int32_t r : rows) out.push_back(top_tokens(top[static_cast<size_t>(r)]));
  return out;
}

Event SessionImpl::generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const EventFn& on_event) {
  eng_.model().check_file();
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
  if (opts.logprobs > kMaxLogprobs)
    throw Error(fmt::format("logprobs asks for {} alternatives (at most {})", opts.logprobs, kMaxLogprobs));

  // Reuse the cached prefix: all of the history when the prompt extends it, else the longest
  // prefix ending at a recurrent-state snapshot (the GDN state cannot be rewound otherwise).
  Event done;
  const auto [n_reuse, snap] = best_prefix(prompt);
  if (n_reuse == 0) {
    reset();
  } else if (snap >= 0) {
    seq_->restore(*snapshots_[snap]);
    history_.resize(seq_->n_past());
    // Snapshots beyond this point belong to the history being abandoned.
    std::erase_if(snapshots_, [&](const Snapshot& x) { return x->n_past() > n_reuse; });
  }
  done.stats.cached_tokens = static_cast<int>(history_.size());
  engine::PassBatcher::Participant part(eng_.batcher());
  const auto t0 = Clock::now();
  // The prompt in segments ending at the requested snapshot positions, then at its end.
  std::vector<int> cuts;
  for (int p : opts.snapshot_at)
    if (p > static_cast<int>(history_.size()) && p < static_cast<int>(prompt.size())) cuts.push_back(p);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (int p : cuts) {
    try {
      backend::Pass pass = backend::Pass::causal(*seq_, prompt.subspan(history_.size(), p - history_.size()),
                                                 backend::LogitRows::None, nullptr);
      run_pass(pass);
    } catch (const std::exception& e) {
      throw Error(e.what());
    }
    history_.insert(history_.end(), prompt.begin() + static_cast<std::ptrdiff_t>(history_.size()), prompt.begin() + p);
    take_snapshot();
  }
  std::vector<float> logits = eval_batched(prompt.subspan(history_.size()), false);
  take_snapshot();
  done.stats.prompt_tokens = static_cast<int>(prompt.size()) - done.stats.cached_tokens;
  done.stats.prompt_seconds = seconds_since(t0);

  std::unique_ptr<sampling::Sampler> sampler_ptr;
  try {
    sampler_ptr = std::make_unique<sampling::Sampler>(to_params(opts.sampling), n_vocab);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
  sampling::Sampler& sampler = *sampler_ptr;
  text::Tokenizer::StreamDecoder decoder(m.tokenizer(), false);
  engine::StopStrings stops(opts.stop);
  int generated = 0;
  bool cancelled = false, ended = false;
  const auto t1 = Clock::now();

  // logprobs: the entry of the token about to be emitted, from the row it was chosen from.
  std::optional<TokenLogprobs> chosen;
  std::vector<sampling::TokenLogprob> alternatives;
  auto record_choice = [&](const float* row, int32_t tok) {
    TokenLogprobs lp{tok, sampler.raw_logprob(row, tok), {}};
    if (opts.logprobs > 0) {
      sampler.top_candidates(row, opts.logprobs, alternatives);
      for (const sampling::TokenLogprob& a : alternatives) lp.top.push_back(TopToken{a.token, a.logprob});
    }
    chosen = std::move(lp);
  };

  // Every output token goes through here, in order, in every mode.
  decode::Emit emit = [&](int32_t tok) {
    ++generated;
    const bool end = !opts.ignore_eos && m.tokenizer().is_eog(tok);
    Event ev;
    ev.tokens = {tok};
    if (chosen) {
      ev.logprobs.push_back(std::move(*chosen));
      chosen.reset();
    }
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
      o.observer = [&](const decode::BlockView& v) {
        opts.on_block(BlockEvent{v.tokens, v.decided, v.pass, v.confidence, v.block, v.accepted});
      };
    if (opts.logprobs >= 0) {
      o.logprobs = opts.logprobs;
      o.on_logprobs = [&](const decode::TokenLogprobs& d) {
        TokenLogprobs lp{d.token, d.logprob, {}};
        for (const sampling::TokenLogprob& a : d.top) lp.top.push_back(TopToken{a.token, a.logprob});
        chosen = std::move(lp);
      };
    }
    decode::Context ctx{[this](backend::Pass& p) { run_pass(p); }, *seq_, sampler, history_, n_vocab};
    const int32_t pending = sampler.sample(logits.data(), history_).token;
    if (opts.logprobs >= 0) record_choice(logits.data(), pending);
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

std::pair<int, int> SessionImpl::best_prefix(std::span<const int32_t> prompt) const {
  if (!history_.empty() && history_.size() < prompt.size() && std::equal(history_.begin(), history_.end(), prompt.begin()))
    return {static_cast<int>(history_.size()), -1};
  size_t common = 0;
  const size_t n = std::min(history_.size(), prompt.size());
  while (common < n && history_[common] == prompt[common]) ++common;
  int best = -1;
  for (size_t i = 0; i < snapshots_.size(); ++i) {
    const int t = snapshots_[i]->n_past();
    // At least one prompt token must be left to evaluate (its logits start the generation).
    if (t > 0 && static_cast<size_t>(t) <= common && static_cast<size_t>(t) < prompt.size() &&
        (best < 0 || t > snapshots_[best]->n_past()))
      best = static_cast<int>(i);
  }
  return best < 0 ? std::pair{0, -1} : std::pair{snapshots_[best]->n_past(), best};
}

int SessionImpl::reusable_prefix(std::span<const int32_t> prompt) const { return best_prefix(prompt).first; }

void SessionImpl::take_snapshot() {
  const int keep = eng_.snapshots();
  if (keep == 0 || seq_->recurrent_bytes() == 0) return;
  if (!snapshots_.empty() && snapshots_.back()->n_past() == seq_->n_past()) return;
  Snapshot s;
  if (static_cast<int>(snapshots_.size()) >= keep) {
    s = std::move(snapshots_.front());  // reuse the oldest one's storage
    snapshots_.erase(snapshots_.begin());
  } else {
    s = seq_->new_snapshot();
  }
  seq_->save(*s);
  snapshots_.push_back(std::move(s));
}

}  // namespace

std::unique_ptr<Engine> Engine::load(const std::string& path, const EngineOptions& opts) {
  try {
    gguf::OpenOptions fo;
    fo.mmap = opts.mmap;
    if (opts.on_progress) fo.on_read = [&opts](uint64_t done, uint64_t total) { opts.on_progress("read", done, total); };
    auto m = model::Model::load(path, fo);
    backend::ExecutorOptions eo;
    eo.n_threads = opts.n_threads;
    eo.max_batch = opts.max_batch;
    eo.device = opts.device;
    eo.n_gpu_layers = opts.n_gpu_layers;
    eo.cpu_moe = opts.cpu_moe;
    eo.n_cpu_moe = opts.n_cpu_moe;
    eo.stream_experts = opts.stream_experts;
    eo.override_tensor = opts.override_tensor;
    if (!opts.vram_budget.empty()) eo.vram_budget = backend::parse_size(opts.vram_budget);
    // The sessions' caches as EngineImpl sizes them (n_ctx + the block scratch).
    eo.n_ctx = (opts.n_ctx > 0 ? opts.n_ctx : std::min(m->hp().n_ctx_train, kMaxContext)) + kMaxBlock;
    eo.kv = {to_dtype(opts.cache_type_k), to_dtype(opts.cache_type_v)};
    eo.n_seq = std::max(1, opts.n_seq);
    eo.repack = opts.repack;
    if (opts.on_progress) eo.on_repack = [&opts](uint64_t done, uint64_t total) { opts.on_progress("repack", done, total); };
    auto exec = backend::make_executor(*m, eo);
    return std::make_unique<EngineImpl>(std::move(m), std::move(exec), opts);
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

std::string_view prefault_state_name(PrefaultStatus::State s) {
  switch (s) {
    case PrefaultStatus::State::Off: return "off";
    case PrefaultStatus::State::Running: return "running";
    case PrefaultStatus::State::Done: return "done";
    case PrefaultStatus::State::Stopped: return "stopped";
  }
  return "off";
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
