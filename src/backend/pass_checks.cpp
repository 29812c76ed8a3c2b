// What every backend checks of a pass before it runs (executor.h), with the same messages.
#include <fmt/format.h>

#include "backend/executor.h"

namespace clover::backend {

void check_pass_tokens(const Pass& p, int n_vocab) {
  const int64_t T = static_cast<int64_t>(p.tokens.size());
  if (T == 0) throw model::ModelError("no tokens to evaluate");
  if (p.seq->n_past() + T > p.seq->n_ctx())
    throw model::ModelError(
        fmt::format("context full: {} cached + {} new tokens exceed the context of {}", p.seq->n_past(), T, p.seq->n_ctx()));
  for (int32_t t : p.tokens)
    if (t < 0 || t >= n_vocab)
      throw model::ModelError(fmt::format("token id {} is outside the vocabulary (0..{})", t, n_vocab - 1));
}

std::vector<WantedRow> wanted_rows(const Pass& p) {
  const auto T = static_cast<int32_t>(p.tokens.size());
  std::vector<WantedRow> out;
  if (p.kind == PassKind::Denoise && !p.denoise_rows.empty()) {
    for (int32_t t : p.denoise_rows) out.push_back({t, t});
  } else if (p.kind == PassKind::Denoise || p.rows == LogitRows::All) {
    for (int32_t t = 0; t < T; ++t) out.push_back({t, t});
  } else if (p.rows == LogitRows::Last) {
    out.push_back({T - 1, 0});
  }
  return out;
}

int64_t output_rows(const Pass& p) {
  if (p.kind == PassKind::Causal && p.rows != LogitRows::All) return p.rows == LogitRows::Last ? 1 : 0;
  return static_cast<int64_t>(p.tokens.size());
}

void check_pass_outputs(const Pass& p) {
  if (p.top_k < 0 || p.top_k > sampling::kMaxTop)
    throw model::ModelError(fmt::format("a selection of the {} best entries per row (1..{})", p.top_k, sampling::kMaxTop));
  if (p.top_k > 0 && !p.top) throw model::ModelError("a pass that wants a selection has nowhere to put it");
  const bool wants = p.kind == PassKind::Denoise || p.rows != LogitRows::None;
  if (wants && !p.logits && p.top_k == 0) throw model::ModelError("a pass that wants logits has nowhere to put them");
}

void check_denoise_pass(const Pass& p, int max_batch, bool has_reverse_path) {
  if (p.kind != PassKind::Denoise) return;
  const int64_t T = static_cast<int64_t>(p.tokens.size());
  for (size_t i = 0; i < p.denoise_rows.size(); ++i)
    if (p.denoise_rows[i] < 0 || p.denoise_rows[i] >= T || (i > 0 && p.denoise_rows[i] <= p.denoise_rows[i - 1]))
      throw model::ModelError(fmt::format("denoise rows must be ascending block positions below {} (got {} at index {})", T,
                                          p.denoise_rows[i], i));
  if (T > max_batch)
    throw model::ModelError(fmt::format("a block of {} positions exceeds the largest pass of {} tokens", T, max_batch));
  if (p.reverse_path && !has_reverse_path)
    throw model::ModelError(
        "this file has no reverse in-block GDN path (ssm_rev_* tensors): it runs AR only, or denoise without the reverse path");
}

}  // namespace clover::backend
