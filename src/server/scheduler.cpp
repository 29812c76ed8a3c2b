#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "server/thinking_budget.h"

namespace clover::server {

namespace {

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

bool strict_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return !a.empty() && a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

// ---- Job -------------------------------------------------------------------------------------

Job::Job(JobInput in) : input(std::move(in)), id([] {
  static std::atomic<int64_t> next{0};
  return next++;
}()) {}

bool Job::take(std::vector<Event>& out, std::chrono::milliseconds timeout, std::vector<Pass>* passes) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !events_.empty() || !passes_.empty() || ended_; });
  while (!events_.empty()) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  const bool had_passes = !passes_.empty();
  for (; !passes_.empty(); passes_.pop_front())  // dropped when the consumer does not read them
    if (passes) passes->push_back(std::move(passes_.front()));
  return !(ended_ && out.empty() && !had_passes);
}

std::optional<ApiError> Job::wait_started() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return started_ || ended_; });
  return started_ ? std::nullopt : error_;
}

std::optional<ApiError> Job::error() const {
  std::lock_guard lk(mu_);
  return error_;
}

int Job::prompt_tokens() const {
  std::lock_guard lk(mu_);
  return prompt_tokens_;
}

void Job::push(const Event& ev) {
  {
    std::lock_guard lk(mu_);
    events_.push_back(ev);
    ++pushed_;
    started_ = true;
  }
  cv_.notify_all();
}

void Job::push_pass(const BlockEvent& b) {
  {
    std::lock_guard lk(mu_);
    passes_.push_back(Pass{pushed_, b});
    started_ = true;
  }
  cv_.notify_all();
}

void Job::fail(ApiError e) {
  {
    std::lock_guard lk(mu_);
    error_ = std::move(e);
    ended_ = true;
  }
  cv_.notify_all();
}

void Job::end() {
  {
    std::lock_guard lk(mu_);
    ended_ = true;
  }
  cv_.notify_all();
}

void Job::set_prompt_tokens(int n) {
  std::lock_guard lk(mu_);
  prompt_tokens_ = n;
}

std::vector<int32_t> tokenize_prompt(const Engine& engine, std::string_view prompt, const std::vector<chat::TextSpan>& literal,
                                     size_t from, size_t to) {
  if (literal.empty()) return engine.tokenize(prompt.substr(std::min(from, prompt.size()), to == std::string_view::npos ? to : to - from), true);
  std::vector<int32_t> out;
  for (const chat::PromptPiece& p : chat::prompt_pieces(prompt, literal, from, to)) {
    const std::vector<int32_t> ids = engine.tokenize(p.text, p.parse_special);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

// ---- Scheduler -------------------------------------------------------------------------------

Scheduler::Scheduler(Engine& engine, SchedulerOptions opt, Metrics& metrics)
    : engine_(engine), opt_(opt), metrics_(metrics) {
  slots_.resize(static_cast<size_t>(std::max(1, opt_.n_slots)));
  for (auto& s : slots_) s.session = engine_.new_session();
  metrics_.set_slots(0, n_slots());
  for (auto& s : slots_) s.thread = std::thread([this, &s] { slot_loop(s); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    for (auto& j : queue_) j->cancel = true;
    for (auto& s : slots_)
      if (s.job) s.job->cancel = true;
  }
  cv_.notify_all();
  for (auto& s : slots_) s.thread.join();
  for (auto& j : queue_) j->fail(unavailable("the server is shutting down"));
}

int Scheduler::n_ctx() const { return slots_.front().session->n_ctx(); }

std::vector<Scheduler::SlotState> Scheduler::slot_states() {
  std::lock_guard lk(mu_);
  std::vector<SlotState> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    SlotState st;
    st.id = static_cast<int>(i);
    st.job = slots_[i].job;
    // A busy slot's thread rewrites its tokens; an idle one's are settled (mu_ held).
    if (!st.job) st.cached_tokens = static_cast<int>(slots_[i].tokens.size());
    out.push_back(std::move(st));
  }
  return out;
}

std::shared_ptr<Job> Scheduler::submit(JobInput in) {
  auto job = std::make_shared<Job>(std::move(in));
  if (job->input.prompt_tokens.empty()) {
    try {
      job->tokens = tokenize_prompt(engine_, job->input.prompt_text, job->input.literal);
    } catch (const std::exception& e) {
      throw bad_request(std::string("cannot tokenize the prompt: ") + e.what());
    }
  } else {
    job->tokens = job->input.prompt_tokens;
  }
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw unavailable("the server is shutting down");
    if (static_cast<int>(queue_.size()) >= opt_.max_queue)
      throw unavailable("the server is busy: " + std::to_string(queue_.size()) + " requests are waiting; try again later");
    queue_.push_back(job);
    dispatch_locked();
  }
  cv_.notify_all();
  return job;
}

void Scheduler::cancel_all() {
  std::lock_guard lk(mu_);
  for (auto& j : queue_) j->cancel = true;
  for (auto& s : slots_)
    if (s.job) s.job->cancel = true;
}

void Scheduler::dispatch_locked() {
  while (!queue_.empty()) {
    std::shared_ptr<Job>& job = queue_.front();
    if (job->cancel) {  // the client left while queued
      job->end();
      queue_.pop_front();
      continue;
    }
    std::vector<int32_t> tokens;
    Slot* slot = nullptr;
    try {
      slot = pick_slot(*job, tokens);
    } catch (const std::exception& e) {
      job->fail(bad_request(std::string("cannot tokenize the prompt: ") + e.what()));
      queue_.pop_front();
      continue;
    }
    if (!slot) break;
    slot->job = std::move(job);
    slot->prompt = std::move(tokens);
    slot->last_used = ++clock_;
    queue_.pop_front();
    ++busy_;
  }
  metrics_.set_queue_depth(static_cast<int>(queue_.size()));
  metrics_.set_slots(busy_, n_slots());
}

void Scheduler::slot_loop(Slot& slot) {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stopping_ || slot.job; });
    if (!slot.job) return;  // stopping
    std::shared_ptr<Job> job = slot.job;
    std::vector<int32_t> prompt = std::move(slot.prompt);
    lk.unlock();
    run(slot, *job, std::move(prompt));
    lk.lock();
    slot.job.reset();
    --busy_;
    metrics_.set_batching(engine_.batching_stats());
    if (!stopping_) dispatch_locked();
    else metrics_.set_slots(busy_, n_slots());
    cv_.notify_all();  // dispatch may have handed jobs to other slots
  }
}

Scheduler::Slot* Scheduler::pick_slot(const Job& job, std::vector<int32_t>& tokens) {
  // Ranking: the longest reusable prefix (the slot's cache, or one of its recurrent-state
  // snapshots, continues into the prompt); then an empty slot; then the longest shared prefix:
  // that slot most likely served an earlier turn of this conversation whose history the template
  // re-rendered differently, and overwriting it keeps other conversations' caches alive; then
  // the least recently used.
  const JobInput& in = job.input;
  const bool from_text = in.prompt_tokens.empty();
  const std::vector<int32_t>& whole = job.tokens;
  struct Rank {
    size_t reuse = 0, shared = 0;
    bool empty = false;
    uint64_t age = 0;
    bool operator>(const Rank& o) const {
      if (reuse != o.reuse) return reuse > o.reuse;
      if (empty != o.empty) return empty;
      if (shared != o.shared) return shared > o.shared;
      return age < o.age;
    }
  };
  Slot* best = nullptr;
  Rank best_rank;
  std::vector<int32_t> best_tokens;
  for (Slot& s : slots_) {
    if (s.job) continue;  // busy
    Rank rank;
    rank.age = s.last_used;
    rank.empty = s.tokens.empty();
    std::vector<int32_t> cand;
    // Not where the held text covers a literal span: the slot may hold a real control token where
    // this prompt has the same text from the request.
    const bool literal_in_held = !in.literal.empty() && in.literal.front().begin < s.text.size();
    if (from_text && !literal_in_held && !strict_prefix(s.tokens, whole) && !s.text.empty() &&
        s.text.size() < in.prompt_text.size() && std::string_view(in.prompt_text).starts_with(s.text)) {
      // The prompt continues exactly the text this slot holds (typically: the previous turn's
      // prompt and the model's own output). Keep the slot's tokens for that text, even where they
      // are not the canonical tokenisation of it, and tokenise only the rest.
      cand = s.tokens;
      const auto rest = tokenize_prompt(engine_, in.prompt_text, in.literal, s.text.size());
      cand.insert(cand.end(), rest.begin(), rest.end());
    }
    const std::vector<int32_t>& mine = cand.empty() ? whole : cand;
    rank.reuse = static_cast<size_t>(s.session->reusable_prefix(mine));
    const size_t n = std::min(s.tokens.size(), mine.size());
    while (rank.shared < n && s.tokens[rank.shared] == mine[rank.shared]) ++rank.shared;
    if (!best || rank > best_rank) {
      best = &s;
      best_rank = rank;
      best_tokens = mine;
    }
  }
  tokens = std::move(best_tokens);
  return best;
}

void Scheduler::run(Slot& slot, Job& job, std::vector<int32_t> prompt) {
  if (job.cancel) {  // cancelled between dispatch and start
    job.end();
    return;
  }
  const int n_ctx = slot.session->n_ctx();
  const int n_prompt = static_cast<int>(prompt.size());
  if (prompt.empty()) {
    job.fail(bad_request("the prompt is empty"));
    return;
  }
  if (n_prompt >= n_ctx) {
    job.fail(ApiError(400, "exceed_context_size_error",
                      "the request exceeds the available context size: the prompt has " + std::to_string(n_prompt) +
                          " tokens and the context holds " + std::to_string(n_ctx) +
                          " (at least one token must be left to generate)",
                      json{{"n_prompt_tokens", n_prompt}, {"n_ctx", n_ctx}}));
    return;
  }
  GenerateOptions go = job.input.options;
  if (job.input.history_chars > 0 && job.input.history_chars < job.input.prompt_text.size()) {
    // Keep a snapshot where the next turn will diverge: the next prompt re-renders this one's
    // generation prompt and answer differently (Qwen templates drop the reasoning).
    const std::vector<int32_t> h = tokenize_prompt(engine_, job.input.prompt_text, job.input.literal, 0, job.input.history_chars);
    if (h.size() < prompt.size() && std::equal(h.begin(), h.end(), prompt.begin())) go.snapshot_at.push_back(static_cast<int>(h.size()));
  }
  if (job.input.pass_events) go.on_block = [&job](const BlockEvent& b) { job.push_pass(b); };
  const int room = n_ctx - n_prompt;
  go.max_tokens = job.input.max_tokens_given ? std::min(go.max_tokens, room) : room;
  job.set_prompt_tokens(n_prompt);

  std::vector<int32_t> generated;
  GenerateStats stats;
  bool ok = true;
  try {
    stats = generate(slot, job, prompt, std::move(go), generated);
  } catch (const Error& e) {
    // Bad requests the engine catches itself (e.g. a decoding mode it does not support yet).
    ok = false;
    job.fail(bad_request(e.what()));
  } catch (const std::exception& e) {
    ok = false;
    job.fail(server_error(std::string("generation failed: ") + e.what()));
  }

  // Mirror what the session's cache now holds: the prompt and every generated token, a final end
  // token included (the decoders commit it, so the next turn, which renders it again, reuses it).
  // If the mirror disagrees with the session, forget it: the engine compares its own history
  // anyway, so this only costs a cache miss.
  slot.tokens = std::move(prompt);
  slot.tokens.insert(slot.tokens.end(), generated.begin(), generated.end());
  if (!ok || slot.session->n_past() != static_cast<int>(slot.tokens.size())) {
    slot.tokens.clear();
    if (!ok) slot.session->reset();
  }
  slot.text.clear();
  for (int32_t t : slot.tokens) slot.text += engine_.token_text(t);
  if (!valid_utf8(slot.text)) slot.text.clear();

  if (ok) {
    metrics_.generation_done(stats, job.cancel.load());
    job.end();
  }
}

namespace {

// The statistics of a generation stopped at the thinking budget (`first`, absent for budget 0)
// and of its continuation after the forced closing text (`second`), as one generation.
GenerateStats merge_stats(const GenerateStats* first, const GenerateStats& second, int n_forced, int n_generated) {
  GenerateStats t = second;
  if (first) {
    t.prompt_tokens = first->prompt_tokens;
    t.cached_tokens = first->cached_tokens;
    t.prompt_seconds = first->prompt_seconds;
    t.generate_seconds = first->generate_seconds + second.prompt_seconds + second.generate_seconds;
    t.passes += first->passes;
    t.denoise_passes += first->denoise_passes;
    t.blocks += first->blocks;
    t.denoise_seconds += first->denoise_seconds;
  } else {
    t.prompt_tokens = std::max(0, second.prompt_tokens - n_forced);
  }
  t.generated_tokens = n_generated;
  return t;
}

}  // namespace

GenerateStats Scheduler::generate(Slot& slot, Job& job, const std::vector<int32_t>& prompt, GenerateOptions go,
                                  std::vector<int32_t>& generated) {
  ThinkingBudget budget(job.input.thinking_open, job.input.reasoning_budget);
  const bool spent_at_start = budget.spent_at_start();
  bool spent = spent_at_start;
  GenerateStats first;
  if (!spent) {
    Event last = slot.session->generate(prompt, go, [&](const Event& ev) {
      if (ev.finish != FinishReason::None && spent) {
        // The end of a generation stopped at the budget: its text goes on, its finish does not.
        if (!ev.text.empty()) job.push(Event{ev.text, {}, FinishReason::None, {}, {}});
        return true;
      }
      generated.insert(generated.end(), ev.tokens.begin(), ev.tokens.end());
      job.n_decoded += static_cast<int>(ev.tokens.size());
      for (int32_t t : ev.tokens)
        if (!engine_.is_end_token(t) && budget.push(ev.text)) spent = true;
      job.reasoning_tokens = budget.thinking_tokens();
      job.push(ev);
      return !job.cancel.load() && !spent;
    });
    if (!spent || job.cancel.load()) return last.stats;
    first = last.stats;
  }

  // The budget is spent: the closing text, as if the model had written it, then the answer.
  const std::vector<int32_t> forced = engine_.tokenize(job.input.reasoning_end, true);
  budget.close();
  const bool ran_first = !spent_at_start;
  std::vector<int32_t> next = prompt;
  next.insert(next.end(), generated.begin(), generated.end());
  next.insert(next.end(), forced.begin(), forced.end());
  generated.insert(generated.end(), forced.begin(), forced.end());
  job.n_decoded += static_cast<int>(forced.size());
  job.push(Event{job.input.reasoning_end, forced, FinishReason::None, {}, {}});

  const int room = slot.session->n_ctx() - static_cast<int>(next.size());
  go.max_tokens = std::min(go.max_tokens - static_cast<int>(generated.size()), room);
  go.snapshot_at.clear();
  go.sampling.seed += 1;  // a fresh stream for the answer
  GenerateStats second;
  if (go.max_tokens <= 0) {  // the budget's closing text used up the tokens or the context
    Event done{"", {}, FinishReason::Length, merge_stats(ran_first ? &first : nullptr, second, 0, static_cast<int>(generated.size())), {}};
    job.push(done);
    return done.stats;
  }
  GenerateStats merged;
  slot.session->generate(next, go, [&](const Event& ev) {
    generated.insert(generated.end(), ev.tokens.begin(), ev.tokens.end());
    job.n_decoded += static_cast<int>(ev.tokens.size());
    if (ev.finish == FinishReason::None) {
      job.push(ev);
      return !job.cancel.load();
    }
    Event done = ev;
    done.stats = merged = merge_stats(ran_first ? &first : nullptr, ev.stats, static_cast<int>(forced.size()),
                                      static_cast<int>(generated.size()));
    job.push(done);
    return true;
  });
  return merged;
}

}  // namespace clover::server
