#include "decode/decoders.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>

namespace clover::decode {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// What a pass hands back for each of up to `rows` rows: the row's best entries and normaliser
// (selection on the backend, sampling/row_top.h) when `k` of them suffice, else the whole row.
// A block's first denoising pass then reads back a few hundred bytes a row, not n_vocab floats.
class Rows {
 public:
  // k: entries per row; 0: whole rows.
  Rows(int rows, int n_vocab, int k) : V_(n_vocab), k_(k) {
    if (k_ > 0)
      top_.resize(static_cast<size_t>(rows));
    else
      logits_.resize(static_cast<size_t>(rows) * n_vocab);
  }
  // The sampler's rows: selection when it can choose from one.
  static Rows for_sampler(const sampling::Sampler& s, int rows, int n_vocab, bool whole = false) {
    return Rows(rows, n_vocab, whole ? 0 : s.top_needed());
  }
  // Row r's logits (whole rows only).
  const float* row(int r) const { return &logits_.at(static_cast<size_t>(r) * V_); }

  void attach(backend::Pass& p) {
    p.logits = k_ > 0 ? nullptr : logits_.data();
    p.top_k = k_;
    p.top = k_ > 0 ? top_.data() : nullptr;
  }
  // The sampler's choice for row r (history: the penalties' tokens, unused with a selection).
  sampling::Sampler::Choice sample(sampling::Sampler& s, int r, std::span<const int32_t> history, int32_t exclude = -1) {
    return k_ > 0 ? s.sample_top(top_[r], exclude) : s.sample(&logits_[static_cast<size_t>(r) * V_], history, exclude);
  }
  // Greedy draft of row r (the best token but `except`) and its probability; needs k >= 2.
  std::pair<int32_t, float> draft(int r, int32_t except) const {
    const sampling::RowTop& t = top_.at(static_cast<size_t>(r));
    for (int i = 0; i < t.n; ++i)
      if (t.top[i].id != except) return {t.top[i].id, static_cast<float>(std::exp(t.logprob(t.top[i].logit)))};
    return {-1, 0.0f};
  }

 private:
  int V_, k_;
  std::vector<float> logits_;
  std::vector<sampling::RowTop> top_;
};

// Runs a causal pass through the context (appends `tokens` to the sequence, not to `committed`).
void causal(Context& c, std::span<const int32_t> tokens, backend::LogitRows rows, Rows* out) {
  backend::Pass p = backend::Pass::causal(c.seq, tokens, rows, nullptr);
  if (out) out->attach(p);
  c.run_pass(p);
}

// A causal pass that commits `tokens` to the state (and to the committed list).
void commit(Context& c, std::span<const int32_t> tokens, backend::LogitRows rows, Rows* out, Stats& stats) {
  const auto t0 = Clock::now();
  causal(c, tokens, rows, out);
  c.committed.insert(c.committed.end(), tokens.begin(), tokens.end());
  ++stats.causal_passes;
  stats.causal_seconds += since(t0);
}

// A denoising pass over `block`; rows only for the block positions in `rows` (the outputs that
// predict a still-masked position).
void denoise(Context& c, const std::vector<int32_t>& block, std::span<const int32_t> rows, const Options& o, Rows& out,
             Stats& stats) {
  const auto t0 = Clock::now();
  backend::Pass p = backend::Pass::denoise(c.seq, block, rows, nullptr, o.reverse_path);
  out.attach(p);
  c.run_pass(p);
  ++stats.denoise_passes;
  stats.denoise_seconds += since(t0);
}

// The logprobs of `token`, chosen from `row` (raw logits, whole row).
// exclude: left out of the alternatives (the mask token of a denoising row).
TokenLogprobs logprobs_of(Context& c, const Options& o, const float* row, int32_t token, int32_t exclude = -1) {
  TokenLogprobs lp;
  lp.token = token;
  lp.logprob = c.sampler.raw_logprob(row, token);
  if (o.logprobs > 0) c.sampler.top_candidates(row, o.logprobs, lp.top, exclude);
  return lp;
}

}  // namespace

void decode_ar(Context& c, int32_t pending, const Options& o, const Emit& emit, Stats& stats) {
  const bool lp = o.logprobs >= 0 && o.on_logprobs;
  Rows out = Rows::for_sampler(c.sampler, 1, c.n_vocab, lp);
  int32_t p = pending;
  for (int emitted = 1;; ++emitted) {
    const bool go = emit(p);
    if (!go || emitted >= o.max_tokens) {
      commit(c, std::span<const int32_t>(&p, 1), backend::LogitRows::None, nullptr, stats);
      return;
    }
    commit(c, std::span<const int32_t>(&p, 1), backend::LogitRows::Last, &out, stats);
    p = out.sample(c.sampler, 0, c.committed).token;
    if (lp) o.on_logprobs(logprobs_of(c, o, out.row(0), p));
  }
}

void decode_diffusion(Context& c, int32_t pending, const Options& o, const Emit& emit, Stats& stats) {
  const int B = o.block_size;
  // Compared in log space: near 1 float probabilities saturate and would create false ties.
  const double log_tau = o.threshold > 0 ? std::log(o.threshold) : -std::numeric_limits<double>::infinity();
  const bool lp = o.logprobs >= 0 && o.on_logprobs;
  Rows out = Rows::for_sampler(c.sampler, B, c.n_vocab, lp);
  std::vector<TokenLogprobs> lps(lp ? B : 0);  // per block position, from the row that decided it
  bool first_block = true;                     // its pending token's logprobs are the caller's
  std::vector<int32_t> block(B);
  std::vector<bool> decided(B);
  std::vector<float> confidence(B);  // for the observer
  std::vector<sampling::Sampler::Choice> cand(B);
  std::vector<int32_t> rows;  // the outputs a pass needs: those before an undecided position
  rows.reserve(B);
  int32_t p = pending;
  int emitted = 0;
  for (;;) {
    // A limit does not shrink the block (CLOVER-SPEC 2.1): every pass decides over all B
    // positions, exactly as without a limit, and only the output stops at the limit. So the
    // answer with a limit N is the first N tokens of the answer with a larger one.
    const int need = std::min(B, o.max_tokens - emitted);  // positions of this block that will be output
    std::fill(block.begin(), block.end(), o.mask_token);
    std::fill(decided.begin(), decided.end(), false);
    std::fill(confidence.begin(), confidence.end(), 0.0f);
    block[0] = p;
    decided[0] = true;
    int next = 0;  // first position not yet emitted
    bool stop = false;
    auto flush = [&] {
      while (!stop && next < need && decided[next]) {
        ++emitted;
        if (lp && !(next == 0 && first_block)) o.on_logprobs(lps[next]);
        if (!emit(block[next++])) stop = true;
      }
    };
    flush();
    // Passes until the positions to output are decided (later passes could not change them).
    for (int pass = 1; !stop && next < need; ++pass) {
      rows.clear();
      for (int j = 1; j < B; ++j)
        if (!decided[j]) rows.push_back(j - 1);
      denoise(c, block, rows, o, out, stats);
      int best = -1;
      for (int j = 1; j < B; ++j) {
        if (decided[j]) continue;
        // Position j is predicted by the output at j-1 (AR-style shift).
        cand[j] = out.sample(c.sampler, j - 1, c.committed, o.mask_token);
        if (best < 0 || cand[j].logprob > cand[best].logprob) best = j;  // ties: lowest position
      }
      int filled = 0;
      for (int j = 1; j < B; ++j)
        if (!decided[j] && (cand[j].logprob >= log_tau || j == best)) {
          block[j] = cand[j].token;
          decided[j] = true;
          confidence[j] = static_cast<float>(std::exp(cand[j].logprob));
          if (lp) lps[j] = logprobs_of(c, o, out.row(j - 1), block[j], o.mask_token);
          ++filled;
        }
      stats.denoised_tokens += filled;
      if (o.observer) o.observer(BlockView{block, decided, confidence, stats.blocks, pass});
      flush();
    }
    if (stop || need < B) {
      // Keep the state equal to the output: commit what was emitted of this block.
      commit(c, std::span<const int32_t>(block.data(), next), backend::LogitRows::None, nullptr, stats);
      ++stats.blocks;
      return;
    }
    // The commit pass: the finished block, causally, into the cache; its last output is the next
    // pending token.
    commit(c, block, backend::LogitRows::Last, &out, stats);
    ++stats.blocks;
    if (emitted >= o.max_tokens) return;
    p = out.sample(c.sampler, 0, c.committed).token;
    if (lp) lps[0] = logprobs_of(c, o, out.row(0), p);
    first_block = false;
  }
}

void decode_spec(Context& c, int32_t pending, const Options& o, const Emit& emit, Stats& stats) {
  const int B = o.block_size;
  Rows drafts(B, c.n_vocab, 2);  // greedy drafts and their probabilities: two entries a row suffice
  const bool lp = o.logprobs >= 0 && o.on_logprobs;
  Rows verified = Rows::for_sampler(c.sampler, B, c.n_vocab, lp);
  std::vector<TokenLogprobs> lps(lp ? B : 0);  // lps[i]: block position i, from verifier row i-1
  bool first = true;                           // the first pending token's logprobs are the caller's
  std::vector<int32_t> block(B);
  const std::unique_ptr<backend::Snapshot> snapshot = c.seq.new_snapshot();
  const std::vector<bool> all_decided(B, true);
  std::vector<float> confidence(B);  // for the observer
  std::vector<int32_t> draft_rows(B - 1);  // outputs 0 .. B-2 draft positions 1 .. B-1
  for (int j = 0; j < B - 1; ++j) draft_rows[j] = j;
  int32_t p = pending;
  int emitted = 0;
  for (;;) {
    ++emitted;
    if (lp && !first) o.on_logprobs(lps[0]);
    first = false;
    if (!emit(p) || emitted >= o.max_tokens) {
      commit(c, std::span<const int32_t>(&p, 1), backend::LogitRows::None, nullptr, stats);
      return;
    }
    // Guess: one denoising pass drafts every position at once.
    std::fill(block.begin(), block.end(), o.mask_token);
    block[0] = p;
    denoise(c, block, draft_rows, o, drafts, stats);
    for (int j = 1; j < B; ++j) std::tie(block[j], confidence[j]) = drafts.draft(j - 1, o.mask_token);
    if (o.observer) o.observer(BlockView{block, all_decided, confidence, stats.blocks, 1});

    // Verify: one causal pass over the draft. The GDN state cannot be truncated, so keep a copy
    // (the snapshot's storage is reused after the first cycle).
    c.seq.save(*snapshot);
    const auto t0 = Clock::now();
    causal(c, block, backend::LogitRows::All, &verified);
    ++stats.causal_passes;
    stats.causal_seconds += since(t0);

    // Accept the longest run where the draft equals the verifier's own choice.
    int accepted = 0;
    int32_t a = verified.sample(c.sampler, 0, c.committed).token;
    while (accepted < B - 1 && block[accepted + 1] == a) {
      if (lp) lps[accepted + 1] = logprobs_of(c, o, verified.row(accepted), a);
      ++accepted;
      a = verified.sample(c.sampler, accepted, c.committed).token;
    }
    if (lp) lps[0] = logprobs_of(c, o, verified.row(accepted), a);  // the next pending token
    if (o.observer) o.observer(BlockView{block, all_decided, confidence, stats.blocks, 1, accepted});
    int kept = accepted;  // drafts actually output (emit may stop earlier)
    bool stop = false;
    for (int i = 1; i <= accepted; ++i) {
      ++emitted;
      if (lp) o.on_logprobs(lps[i]);
      if (!emit(block[i]) || emitted >= o.max_tokens) {
        kept = i;
        stop = true;
        break;
      }
    }
    stats.denoised_tokens += kept;
    ++stats.blocks;
    if (kept + 1 < B) {
      // Roll back: restore the recurrent state and the length (the KV rows beyond it are
      // overwritten by the replay), replay the kept tokens.
      c.seq.restore(*snapshot);
      commit(c, std::span<const int32_t>(block.data(), kept + 1), backend::LogitRows::None, nullptr, stats);
    } else {
      c.committed.insert(c.committed.end(), block.begin(), block.end());
    }
    if (stop) return;
    p = a;
  }
}

}  // namespace clover::decode
