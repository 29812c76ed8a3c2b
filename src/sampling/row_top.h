// Selection on the backend (issue #20, backend/executor.h Pass::top_k): what a decoder needs of a row of logits, without the row.
//
// A pass that asks for it (Pass::top_k > 0) gets, for each row it wants, the row's k best entries
// and its log-softmax normaliser: enough for greedy decoding (the best token other than the mask
// and its log-probability), for a temperature / top-k / top-p / min-p draw when top_k < k (the
// kept tokens are all among the k best), for a guess-then-verify draft and its confidence, and for
// OpenAI `top_logprobs` (at most 20). A block's first denoising pass then reads back 31 rows of a
// few hundred bytes instead of 31 x n_vocab floats.
//
//   max_logit   the row's largest logit (NaN entries are skipped everywhere, as the sampler does)
//   log1p_rest  log(1 + sum over every entry but the first maximum of exp(x - max_logit)):
//               log-softmax(x_i) = (x_i - max_logit) - log1p_rest, precise near probability 1
//   top[0, n)   the min(k, non-NaN entries) largest, descending, ties to the lower id
//
// select_top_ref is the plain reference every backend's selection is tested against; the CPU
// backend uses it as is (its sums are the sampler's, so decoding from a RowTop gives the same
// tokens and log-probabilities as decoding from the row).
#pragma once
#include <cstdint>

namespace clover::sampling {

constexpr int kMaxTop = 64;  // the most entries a RowTop holds

struct TopEntry {
  int32_t id;
  float logit;
};

struct RowTop {
  float max_logit = 0;
  double log1p_rest = 0;
  int32_t n = 0;
  TopEntry top[kMaxTop];
  double logprob(float logit) const { return (static_cast<double>(logit) - max_logit) - log1p_rest; }
};

// k in [1, kMaxTop]. A row with no non-NaN entry gives n = 0 (and max_logit -inf).
void select_top_ref(const float* row, int64_t n_vocab, int k, RowTop& out);

}  // namespace clover::sampling
