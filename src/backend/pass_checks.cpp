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

}  // namespace clover::backend
