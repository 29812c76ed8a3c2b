// Token sampling from one row of logits: greedy, temperature, top-k, top-p, min-p, OpenAI presence and
// frequency penalties, llama.cpp's repeat penalty, and a seeded RNG. Every choice also reports the
// chosen token's probability under the distribution it was drawn from, which block-diffusion
// decoding uses as the confidence of a position (CLOVER-SPEC §2.1).
//
// Order of the steps (the temperature -> top-k -> top-p -> min-p order of HF transformers, vLLM and
// the diffusion decoders; llama.cpp's default chain differs: it applies the temperature last):
//   1. penalties on the raw logits: repeat (last repeat_last_n history tokens), then
//      presence/frequency (whole history), then the logit bias (OpenAI `logit_bias`)
//   2. greedy (temperature <= 0): argmax, ties to the lowest id; probability = softmax at
//      temperature 1 over the whole (penalised) row
//   3. otherwise: z = logit / temperature; keep the top_k largest z; keep the smallest
//      highest-first prefix whose probability reaches top_p; keep tokens with p >= min_p * p_max;
//      renormalise over what is kept and draw.
// Each filter renormalises over what the previous one kept. Probabilities and log-probabilities are
// computed in double as log-softmax with the maximum subtracted, so they are usable near 1.0.
//
// The excluded token (the diffusion mask token) is never chosen but keeps its share of every
// probability: the reported probability of the chosen token is its own, not renormalised over the
// other tokens. If the filters keep only the excluded token, the best other token is kept with it.
//
// Reproducibility: the same seed, row and history give the same tokens with the same build. With
// top_k set, the draw walks the kept tokens in (logit descending, id ascending) order, so a seed
// picks the same token whether the sampler sees the whole row or only its best entries
// (sample_top: selection on the backend, row_top.h). Without top_k the draw walks an internal order,
// so a change to the selection code may change which token a seed picks (never the distribution).
//
// No allocation per call: scratch buffers of n_vocab entries live in the Sampler. A Sampler is not
// thread-safe; use one per sequence (its RNG stream is that sequence's). Cost per call at n_vocab
// 248,320, one core of the 2-vCPU EPYC VM, CPU time: greedy 0.6 ms (most of it the full-row
// exp sum, see sum_exp.h); top_k 20 (+ top_p, min_p, penalties) 0.4 ms; temperature alone 1.7 ms;
// top_p alone 2.5-3.5 ms.
#pragma once
#include <array>
#include <functional>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "sampling/row_top.h"

namespace clover::sampling {

struct SamplingParams {
  float temperature = 1.0f;        // <= 0: greedy
  int32_t top_k = 0;               // <= 0: off
  float top_p = 1.0f;              // in [0, 1]; 1: off
  float min_p = 0.0f;              // in [0, 1]; 0: off
  float presence_penalty = 0.0f;   // OpenAI: logit -= presence_penalty if the token occurs in history
  float frequency_penalty = 0.0f;  // OpenAI: logit -= frequency_penalty * (occurrences in history)
  float repeat_penalty = 1.0f;     // llama.cpp: logit / p if logit > 0 else logit * p; 1: off
  int32_t repeat_last_n = 64;      // window of the repeat penalty: 0 off, -1 whole history
  uint64_t seed = 0;
  // OpenAI logit_bias: (token, bias) pairs added to the logits after the penalties; ids in
  // [0, n_vocab), biases finite. -100 bans a token in practice, +100 forces it.
  std::vector<std::pair<int32_t, float>> logit_bias;

  bool greedy() const { return temperature <= 0.0f; }
};

struct TokenLogprob {
  int32_t token;
  double logprob;
};

class Sampler {
 public:
  struct Choice {
    int32_t token;
    double prob;     // probability of `token` under the distribution it was chosen from
    double logprob;  // log(prob), computed directly (finite even when prob rounds to 0 or 1)
  };

  // Throws std::invalid_argument for n_vocab < 1 or parameters outside their ranges.
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // logits: n_vocab floats. history: the tokens the penalties look at (for OpenAI semantics, the
  // generated tokens; ids outside [0, n_vocab) are ignored). exclude_token: never chosen (-1: none).
  // NaN logits are treated as -inf. Throws std::invalid_argument if no token can be chosen.
  Choice sample(const float* logits, std::span<const int32_t> history = {}, int32_t exclude_token = -1);

  // Selection on the backend: how many of a row's best entries (a RowTop of that k) sample_top needs
  // to choose as sample() would from the whole row; 0 when it needs the row: penalties change
  // logits the selection does not see (so does a logit bias), and a draw without top_k (or with top_k >= kMaxTop) may keep
  // tokens beyond the best kMaxTop. Greedy: 2 (the best, and the next in case the best is excluded).
  int top_needed() const;
  // The choice sample() makes from the row `top` summarises (top.n >= top_needed() entries, or every
  // non-NaN entry of the row): greedy gives the same token and log-probability; a draw gives the
  // same token from the same point of the RNG stream. No history: top_needed() is 0 with penalties.
  Choice sample_top(const RowTop& top, int32_t exclude_token = -1);

  // The k most likely tokens of the raw row (temperature 1, no penalties, no filters: what the
  // model predicts, as OpenAI `top_logprobs` reports), best first, ties to the lowest id. The
  // excluded token is left out of the list but keeps its share of the probabilities. `out` is
  // cleared and refilled; reuse it to avoid allocating.
  void top_candidates(const float* logits, int k, std::vector<TokenLogprob>& out, int32_t exclude_token = -1);

  // log-softmax of the raw row at `token` (temperature 1, no penalties): the OpenAI `logprob`.
  double raw_logprob(const float* logits, int32_t token) const;

  void reseed(uint64_t seed);
  const SamplingParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  struct Candidate {
    double z;  // penalised logit / temperature
    double w;  // exp(z - max z) once the filters start
    int32_t id;
  };

  void apply_penalties(std::span<const int32_t> history);
  Choice sample_greedy(int32_t exclude_token) const;
  Choice sample_filtered(int32_t exclude_token);
  // The filters and the draw over candidates_[0, n) (z set, in canonical order when top_k is set);
  // best_other: the best selectable token other than exclude_token with its logit (id -1: none),
  // asked for only when the filters keep the excluded token alone.
  struct TokenLogit {
    int32_t id;
    float logit;
  };
  Choice draw(size_t n, int32_t exclude_token, const std::function<TokenLogit()>& best_other);
  bool penalised() const;
  size_t gather_top(const float* row, double scale, size_t k, int32_t skip, bool drop_minus_inf);
  size_t top_p_cut(size_t n, double max_z, double sum);
  size_t mass_prefix_cut(size_t lo, size_t hi, double mass_before, double target);
  double uniform01();

  SamplingParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::vector<float> work_;            // [n_vocab] penalised logits
  std::vector<Candidate> candidates_;  // [n_vocab] tokens still in play
  std::vector<int32_t> counts_;        // [n_vocab] history counts; all zero between calls
  static constexpr double kTopPBucketsPerNat = 8.0;
  std::array<double, 256> bucket_mass_;  // top-p: mass per 1/8-nat bucket of -log w (32 nats)
};

}  // namespace clover::sampling
