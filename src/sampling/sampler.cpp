#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "sampling/sum_exp.h"

namespace clover::sampling {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool valid_id(int32_t id, int32_t n_vocab) { return id >= 0 && id < n_vocab; }

// Descending z, ties to the lowest id: a strict total order, so every selection below gives the same
// result for the same row.
bool before(double za, int32_t ia, double zb, int32_t ib) { return za > zb || (za == zb && ia < ib); }

// log-softmax of a row as (x - max) - log1p(sum over the others of exp(x - max)): the log-probability
// of a token near 1.0 keeps its precision (log(1 + 1e-18), or max + tiny - max, would round to 0).
// NaN entries are skipped; max is -inf when every entry is -inf or NaN.
struct LogSoftmax {
  double max = kNegInf;
  double log1p_rest = 0.0;
  double operator()(double x) const { return (x - max) - log1p_rest; }
};

// arg: the index of the row's maximum (-1 when there is none).
LogSoftmax log_softmax_at_max(const float* x, int32_t n, int32_t arg) {
  if (arg < 0) return {};
  const double m = x[arg];
  const double rest = sum_exp(x, arg, m) + sum_exp(x + arg + 1, n - arg - 1, m);
  return {m, std::log1p(rest)};
}

LogSoftmax log_softmax_of(const float* x, int32_t n) {
  int32_t arg = -1;
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i)
    if (x[i] > m) m = x[i], arg = i;  // false for NaN
  return log_softmax_at_max(x, n, arg);
}

void check_params(const SamplingParams& p, int32_t n_vocab) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("sampling: " + what); };
  if (n_vocab < 1) fail("n_vocab must be at least 1");
  if (std::isnan(p.temperature)) fail("temperature is NaN");
  if (!(p.top_p >= 0.0f && p.top_p <= 1.0f)) fail("top_p must be in [0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) fail("min_p must be in [0, 1]");
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty)) fail("repeat_penalty must be > 0");
  if (p.repeat_last_n < -1) fail("repeat_last_n must be -1 (whole history), 0 (off) or a window length");
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty)) fail("penalties must be finite");
  for (const auto& [token, bias] : p.logit_bias) {
    if (!valid_id(token, n_vocab)) fail("logit_bias token " + std::to_string(token) + " is outside the vocabulary");
    if (!std::isfinite(bias)) fail("logit_bias of token " + std::to_string(token) + " is not finite");
  }
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {
  check_params(params, n_vocab);
  work_.resize(n_vocab);
  candidates_.resize(n_vocab);
  counts_.assign(n_vocab, 0);
}

void Sampler::reseed(uint64_t seed) {
  params_.seed = seed;
  rng_.seed(seed);
}

// 53 random bits -> [0, 1); unlike std::generate_canonical, the same on every standard library.
double Sampler::uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

Sampler::Choice Sampler::sample(const float* logits, std::span<const int32_t> history, int32_t exclude_token) {
  std::copy(logits, logits + n_vocab_, work_.begin());
  apply_penalties(history);
  if (!valid_id(exclude_token, n_vocab_)) exclude_token = -1;
  return params_.greedy() ? sample_greedy(exclude_token) : sample_filtered(exclude_token);
}

// llama.cpp order: the repeat penalty first, then frequency/presence, on the same logit.
void Sampler::apply_penalties(std::span<const int32_t> history) {
  const SamplingParams& p = params_;
  if (p.repeat_penalty != 1.0f && p.repeat_last_n != 0) {
    size_t n = history.size();
    if (p.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(p.repeat_last_n));
    std::span<const int32_t> window = history.last(n);
    for (int32_t t : window) {
      if (!valid_id(t, n_vocab_) || counts_[t] != 0) continue;
      counts_[t] = 1;  // each distinct token is penalised once
      work_[t] = work_[t] > 0.0f ? work_[t] / p.repeat_penalty : work_[t] * p.repeat_penalty;
    }
    for (int32_t t : window)
      if (valid_id(t, n_vocab_)) counts_[t] = 0;
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    for (int32_t t : history)
      if (valid_id(t, n_vocab_)) ++counts_[t];
    for (int32_t t : history) {
      if (!valid_id(t, n_vocab_) || counts_[t] == 0) continue;
      work_[t] -= static_cast<float>(counts_[t]) * p.frequency_penalty + p.presence_penalty;
      counts_[t] = 0;  // applied once per distinct token; leaves counts_ all zero
    }
  }
  for (const auto& [token, bias] : p.logit_bias) work_[token] += bias;
}

Sampler::Choice Sampler::sample_greedy(int32_t exclude_token) const {
  // One scan finds both the row's maximum (for the normaliser) and the best selectable token.
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  int32_t best = -1, arg = -1;
  float best_v = kMinusInf, max_v = kMinusInf;
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const float v = work_[i];
    if (v > max_v) max_v = v, arg = i;  // strict: ties keep the lowest id; NaN never wins
    if (v > best_v && i != exclude_token) best_v = v, best = i;
  }
  if (best < 0) throw std::invalid_argument("sampling: every selectable logit is -inf or NaN");
  const double logprob = log_softmax_at_max(work_.data(), n_vocab_, arg)(best_v);
  return {best, std::exp(logprob), logprob};
}

// Length of the smallest highest-first prefix of candidates_[0, n) whose probability reaches top_p
// (weights w = exp(z - max_z), total `sum`), with that prefix moved to the front, unsorted. At 250k
// tokens a full sort per token would cost more than everything else in sampling, so: (1) the mass
// of each bucket of -log w (kTopPBucketsPerNat buckets per nat, the last one takes the tail) shows
// which bucket holds the cut; (2) the buckets before it move to the front, then that bucket; (3)
// quickselect on mass finds the cut inside it. Buckets follow the sort order, so the kept set is
// the sorted prefix.
size_t Sampler::top_p_cut(size_t n, double max_z, double sum) {
  const double target = params_.top_p * sum;
  const size_t last = bucket_mass_.size() - 1;
  auto bucket = [&](const Candidate& c) {  // compared before the cast: d can be ~1e30 at tiny temperatures
    const double d = (max_z - c.z) * kTopPBucketsPerNat;
    return d < static_cast<double>(last) ? static_cast<size_t>(d) : last;
  };
  bucket_mass_.fill(0.0);
  for (size_t i = 0; i < n; ++i) bucket_mass_[bucket(candidates_[i])] += candidates_[i].w;
  size_t cut_bucket = last;
  double mass_before = 0.0;
  for (size_t b = 0; b < last; ++b) {
    if (mass_before + bucket_mass_[b] >= target) {
      cut_bucket = b;
      break;
    }
    mass_before += bucket_mass_[b];
  }
  size_t lo = 0;
  for (size_t i = 0; i < n; ++i)
    if (bucket(candidates_[i]) < cut_bucket) std::swap(candidates_[lo++], candidates_[i]);
  size_t hi = lo;
  for (size_t i = lo; i < n; ++i)
    if (bucket(candidates_[i]) == cut_bucket) std::swap(candidates_[hi++], candidates_[i]);
  return mass_prefix_cut(lo, hi, mass_before, target);
}

// Quickselect on probability mass over candidates_[lo, hi): everything in [0, lo) comes first in
// the sort order and holds mass_before < target. Returns the length of the whole kept prefix.
size_t Sampler::mass_prefix_cut(size_t lo, size_t hi, double mass_before, double target) {
  auto cmp = [](const Candidate& a, const Candidate& b) { return before(a.z, a.id, b.z, b.id); };
  auto c = candidates_.begin();
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(c + lo, c + mid, c + hi, cmp);  // [lo, mid] = the largest of [lo, hi)
    double mass = 0.0;
    for (size_t i = lo; i <= mid; ++i) mass += candidates_[i].w;
    if (mass_before + mass >= target) {
      hi = mid + 1;
    } else {
      mass_before += mass;
      lo = mid + 1;
    }
  }
  std::sort(c + lo, c + hi, cmp);
  for (size_t i = lo; i < hi; ++i) {
    mass_before += candidates_[i].w;
    if (mass_before >= target) return i + 1;
  }
  return hi;  // rounding left the sum a hair short: keep the whole range
}

Sampler::Choice Sampler::sample_filtered(int32_t exclude_token) {
  const SamplingParams& p = params_;
  const double inv_t = 1.0 / p.temperature;
  // Tokens in play: every finite logit (-inf has probability 0; NaN is treated as -inf); with top_k,
  // only the k best, in canonical order (so that sample_top draws the same token).
  const size_t k = p.top_k > 0 ? static_cast<size_t>(p.top_k) : static_cast<size_t>(n_vocab_);
  const size_t n = gather_top(work_.data(), inv_t, k, -1, /*drop_minus_inf=*/true);
  if (n == 0) throw std::invalid_argument("sampling: every selectable logit is -inf or NaN");
  if (p.top_k > 0) {
    auto cmp = [](const Candidate& a, const Candidate& b) { return before(a.z, a.id, b.z, b.id); };
    std::sort(candidates_.begin(), candidates_.begin() + n, cmp);
  }
  return draw(n, exclude_token, [&]() -> TokenLogit {
    int32_t best = -1;
    for (int32_t i = 0; i < n_vocab_; ++i)
      if (i != exclude_token && work_[i] > -std::numeric_limits<float>::infinity() && (best < 0 || work_[i] > work_[best]))
        best = i;
    return {best, best >= 0 ? work_[best] : 0.0f};
  });
}

Sampler::Choice Sampler::draw(size_t n, int32_t exclude_token, const std::function<TokenLogit()>& best_other) {
  const SamplingParams& p = params_;
  const double inv_t = 1.0 / p.temperature;
  // Weights relative to the maximum, which every later filter keeps: w = exp(z - m) <= 1.
  double m = kNegInf;
  for (size_t i = 0; i < n; ++i) m = std::max(m, candidates_[i].z);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += (candidates_[i].w = std::exp(candidates_[i].z - m));

  if (p.top_p < 1.0f && n > 1) n = top_p_cut(n, m, sum);
  if (p.min_p > 0.0f && n > 1) {
    // p_i >= min_p * p_max  <=>  w_i >= min_p; the maximum (w = 1) always stays.
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i)
      if (candidates_[i].w >= p.min_p) std::swap(candidates_[kept++], candidates_[i]);
    n = kept;
  }
  if (n == 1 && candidates_[0].id == exclude_token) {
    // Only the excluded token survived: keep the best other token too.
    const TokenLogit b = best_other();
    if (b.id < 0) throw std::invalid_argument("sampling: every selectable logit is -inf or NaN");
    const double z = b.logit * inv_t;
    candidates_[n++] = {z, std::exp(z - m), b.id};
  }
  if (p.top_k > 0) {  // the filters reorder; the draw walks the canonical order
    auto cmp = [](const Candidate& a, const Candidate& b) { return before(a.z, a.id, b.z, b.id); };
    std::sort(candidates_.begin(), candidates_.begin() + n, cmp);
  }

  // Final distribution over candidates_[0, n), the excluded token included. Its total is
  // 1 (the maximum's weight) + rest, kept apart for log1p.
  double rest = 0.0, excluded_w = 0.0;
  bool max_seen = false;
  for (size_t i = 0; i < n; ++i) {
    if (candidates_[i].id == exclude_token) excluded_w = candidates_[i].w;
    if (!max_seen && candidates_[i].z == m)
      max_seen = true;
    else
      rest += candidates_[i].w;
  }
  const double total = 1.0 + rest;
  const double u = uniform01() * (total - excluded_w);
  size_t chosen = n;
  double acc = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (candidates_[i].id == exclude_token) continue;
    chosen = i;  // the last selectable one if rounding leaves acc <= u
    acc += candidates_[i].w;
    if (acc > u) break;
  }
  const Candidate& c = candidates_[chosen];
  return {c.id, c.w / total, (c.z - m) - std::log1p(rest)};
}

bool Sampler::penalised() const {
  const SamplingParams& p = params_;
  return (p.repeat_penalty != 1.0f && p.repeat_last_n != 0) || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
         !p.logit_bias.empty();
}

int Sampler::top_needed() const {
  if (penalised()) return 0;
  if (params_.greedy()) return 2;
  return params_.top_k > 0 && params_.top_k < kMaxTop ? params_.top_k + 1 : 0;
}

Sampler::Choice Sampler::sample_top(const RowTop& top, int32_t exclude_token) {
  if (!valid_id(exclude_token, n_vocab_)) exclude_token = -1;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  // The best selectable entry (what the greedy scan and the fallback of a draw find).
  int best = -1;
  for (int i = 0; i < top.n && best < 0; ++i)
    if (top.top[i].id != exclude_token && top.top[i].logit > kMinusInf) best = i;
  if (params_.greedy()) {
    if (best < 0) throw std::invalid_argument("sampling: every selectable logit is -inf or NaN");
    const double logprob = top.logprob(top.top[best].logit);
    return {top.top[best].id, std::exp(logprob), logprob};
  }
  if (top_needed() == 0) throw std::logic_error("sampling: sample_top with parameters that need the whole row");
  const double inv_t = 1.0 / params_.temperature;
  size_t n = 0;
  for (int i = 0; i < top.n && n < static_cast<size_t>(params_.top_k); ++i)
    if (top.top[i].logit > kMinusInf) candidates_[n++] = {top.top[i].logit * inv_t, 0.0, top.top[i].id};
  if (n == 0) throw std::invalid_argument("sampling: every selectable logit is -inf or NaN");
  return draw(n, exclude_token, [&]() -> TokenLogit { return {best >= 0 ? top.top[best].id : -1, best >= 0 ? top.top[best].logit : 0.0f}; });
}

void Sampler::top_candidates(const float* logits, int k, std::vector<TokenLogprob>& out, int32_t exclude_token) {
  out.clear();
  if (k <= 0) return;
  const LogSoftmax log_softmax = log_softmax_of(logits, n_vocab_);
  const size_t n = gather_top(logits, 1.0, static_cast<size_t>(k), exclude_token, /*drop_minus_inf=*/false);
  auto cmp = [](const Candidate& a, const Candidate& b) { return before(a.z, a.id, b.z, b.id); };
  std::sort(candidates_.begin(), candidates_.begin() + n, cmp);
  for (size_t i = 0; i < n; ++i) out.push_back({candidates_[i].id, log_softmax(candidates_[i].z)});
}

// The k best entries z = row[i] * scale (descending z, ties to the lowest id) into candidates_[0, n),
// unordered. For k < n_vocab they are kept in a heap whose top is the worst of them: one pass over
// the row, and most entries cost one comparison, instead of materialising all n_vocab candidates.
// NaN entries and `skip` are left out, and -inf entries too when drop_minus_inf.
size_t Sampler::gather_top(const float* row, double scale, size_t k, int32_t skip, bool drop_minus_inf) {
  auto cmp = [](const Candidate& a, const Candidate& b) { return before(a.z, a.id, b.z, b.id); };
  auto first = candidates_.begin();
  const bool heap = k < static_cast<size_t>(n_vocab_);
  size_t n = 0;
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const float v = row[i];
    if (std::isnan(v) || i == skip || (drop_minus_inf && v == -std::numeric_limits<float>::infinity())) continue;
    const Candidate cand{v * scale, 0.0, i};
    if (n < k) {
      candidates_[n++] = cand;
      if (heap) std::push_heap(first, first + n, cmp);
    } else if (cmp(cand, candidates_[0])) {  // ids ascend, so an equal z never displaces
      std::pop_heap(first, first + n, cmp);
      candidates_[n - 1] = cand;
      std::push_heap(first, first + n, cmp);
    }
  }
  return n;
}

double Sampler::raw_logprob(const float* logits, int32_t token) const {
  if (!valid_id(token, n_vocab_)) throw std::out_of_range("sampling: token id outside the vocabulary");
  return log_softmax_of(logits, n_vocab_)(logits[token]);
}

}  // namespace clover::sampling
