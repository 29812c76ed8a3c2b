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
#include "sampling/sampler.h"

namespace clover {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kMaxContext = 131072;

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

class SessionImpl final : public Session {
 public:
  SessionImpl(EngineImpl& eng);
  int n_past() const override { return state_.n_past; }
  int n_ctx() const override { return state_.n_ctx; }
  void reset() override {
    state_.reset();
    history_.clear();
  }
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_positions) override;
  Event generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const EventFn& on_event) override;

 private:
  EngineImpl& eng_;
  model::SequenceState state_;
  std::vector<int32_t> history_;  // tokens in the state
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

 private:
  std::unique_ptr<model::Model> model_;
  ThreadPool pool_;
  model::Forward forward_;
  int n_ctx_ = 0;
  ModelInfo info_;
  std::FILE* trace_ = nullptr;
};

SessionImpl::SessionImpl(EngineImpl& eng) : eng_(eng), state_(eng.model().hp(), eng.n_ctx()) {}

std::vector<float> SessionImpl::eval(std::span<const int32_t> tokens, bool all_positions) {
  const int n_vocab = eng_.model().hp().n_vocab;
  std::vector<float> logits(static_cast<size_t>(all_positions ? tokens.size() : 1) * n_vocab);
  try {
    eng_.forward().causal(state_, tokens, all_positions ? model::LogitRows::All : model::LogitRows::Last, logits.data());
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  return logits;
}

Event SessionImpl::generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const EventFn& on_event) {
  const model::Model& m = eng_.model();
  const int n_vocab = m.hp().n_vocab;
  if (prompt.empty()) throw Error("the prompt is empty");
  if (opts.max_tokens < 0) throw Error(fmt::format("max_tokens must be >= 0 (got {})", opts.max_tokens));
  if (static_cast<int64_t>(prompt.size()) + opts.max_tokens > state_.n_ctx)
    throw Error(fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the context size ({} tokens)", prompt.size(),
                            opts.max_tokens, state_.n_ctx));

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
  std::vector<int32_t> generated;
  const auto t1 = Clock::now();
  FinishReason finish = FinishReason::Length;
  for (int i = 0; i < opts.max_tokens; ++i) {
    const int32_t tok = sampler.sample(logits.data(), history_).token;
    generated.push_back(tok);
    const bool end = !opts.ignore_eos && m.tokenizer().is_eog(tok);
    Event ev;
    ev.tokens = {tok};
    if (!end) ev.text = stops.push(decoder.push(tok));
    if (end || stops.stopped()) finish = FinishReason::Stop;
    const bool last = end || stops.stopped() || i + 1 == opts.max_tokens;
    if (!last) {
      logits = eval(std::span<const int32_t>(&tok, 1), false);
      ++done.stats.passes;
    } else if (!end) {
      // Keep the state consistent with the history: the final token is committed too.
      eval(std::span<const int32_t>(&tok, 1), false);
      ++done.stats.passes;
    }
    if (!on_event(ev)) {
      finish = FinishReason::Stop;
      break;
    }
    if (last) break;
  }
  if (!stops.stopped()) {
    done.text = stops.push(decoder.flush());
    if (stops.stopped()) finish = FinishReason::Stop;
    else done.text += stops.flush();
  }
  done.stats.generated_tokens = static_cast<int>(generated.size());
  done.stats.generate_seconds = seconds_since(t1);
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

}  // namespace clover
