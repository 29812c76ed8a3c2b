#include "sampling/row_top.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/sum_exp.h"

namespace clover::sampling {

void select_top_ref(const float* row, int64_t n_vocab, int k, RowTop& out) {
  k = std::clamp(k, 1, kMaxTop);
  // The first maximum (NaN never wins; an all -inf row has none), as the sampler finds it.
  int64_t arg = -1;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n_vocab; ++i)
    if (row[i] > m) m = row[i], arg = i;
  out.max_logit = m;
  out.log1p_rest = 0;
  if (arg >= 0) {
    const double rest = sum_exp(row, static_cast<size_t>(arg), m) +
                        sum_exp(row + arg + 1, static_cast<size_t>(n_vocab - arg - 1), m);
    out.log1p_rest = std::log1p(rest);
  }
  // The k best in (logit descending, id ascending) order: a sorted insertion list (k <= 64).
  auto before = [](float va, int32_t ia, float vb, int32_t ib) { return va > vb || (va == vb && ia < ib); };
  int n = 0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    const float v = row[i];
    if (std::isnan(v)) continue;
    const auto id = static_cast<int32_t>(i);
    if (n == k && !before(v, id, out.top[n - 1].logit, out.top[n - 1].id)) continue;
    int j = n < k ? n++ : k - 1;
    while (j > 0 && before(v, id, out.top[j - 1].logit, out.top[j - 1].id)) {
      out.top[j] = out.top[j - 1];
      --j;
    }
    out.top[j] = {id, v};
  }
  out.n = n;
}

}  // namespace clover::sampling
