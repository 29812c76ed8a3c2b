#include "backend/routing.h"

#include <algorithm>

#include "kernels/vecmath.h"

namespace clover::backend {

void route_tokens(float* probs, int T, int NE, int k, int32_t* chosen, float* weight) {
  for (int t = 0; t < T; ++t) {
    float* p = probs + static_cast<size_t>(t) * NE;
    const float mx = *std::max_element(p, p + NE);
    const float inv_sum = static_cast<float>(1.0 / kernels::softmax_exp_row(p, p, NE, mx));
    for (int e = 0; e < NE; ++e) p[e] *= inv_sum;
    int32_t* ch = chosen + static_cast<size_t>(t) * k;
    // Top-k by probability (insertion into a sorted list of k); ties go to the lower expert id.
    for (int j = 0; j < k; ++j) ch[j] = -1;
    for (int e = 0; e < NE; ++e) {
      int pos = k;
      while (pos > 0 && (ch[pos - 1] < 0 || p[e] > p[ch[pos - 1]])) --pos;
      if (pos < k) {
        for (int j = k - 1; j > pos; --j) ch[j] = ch[j - 1];
        ch[pos] = e;
      }
    }
    double wsum_d = 0.0;  // in double, as ggml's row sum
    for (int j = 0; j < k; ++j) wsum_d += static_cast<double>(p[ch[j]]);
    const float wsum = std::max(static_cast<float>(wsum_d), 6.103515625e-5f);
    for (int j = 0; j < k; ++j) weight[static_cast<size_t>(t) * k + j] = p[ch[j]] / wsum;
  }
}

void ExpertGroups::group(const int32_t* chosen, int T, int k, int NE) {
  count.assign(NE, 0);
  first.resize(NE);
  n_rows = T * k;
  token.resize(n_rows);
  row_of.resize(n_rows);
  for (int i = 0; i < n_rows; ++i) ++count[chosen[i]];
  int32_t next = 0;
  for (int e = 0; e < NE; ++e) {
    first[e] = next;
    next += count[e];
  }
  std::vector<int32_t>& fill = count;  // reused as a cursor: it counts back up to each expert's rows
  for (int e = 0; e < NE; ++e) fill[e] = 0;
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) {
      const int e = chosen[static_cast<size_t>(t) * k + j];
      const int32_t row = first[e] + fill[e]++;
      token[row] = t;
      row_of[static_cast<size_t>(t) * k + j] = row;
    }
}

int64_t distinct_experts(const int32_t* chosen, int t_begin, int t_end, int k, int NE, std::vector<uint8_t>& seen) {
  seen.assign(NE, 0);
  int64_t n = 0;
  for (int64_t i = static_cast<int64_t>(t_begin) * k; i < static_cast<int64_t>(t_end) * k; ++i)
    if (!seen[chosen[i]]) seen[chosen[i]] = 1, ++n;
  return n;
}

void write_routing_trace(std::FILE* f, int layer, int pos0, const float* probs, const int32_t* chosen, int T, int NE, int k) {
  for (int t = 0; t < T; ++t) {
    const float* p = probs + static_cast<size_t>(t) * NE;
    const int32_t* ch = chosen + static_cast<size_t>(t) * k;
    float best_out = 0.f;
    for (int e = 0; e < NE; ++e)
      if (std::find(ch, ch + k, e) == ch + k) best_out = std::max(best_out, p[e]);
    std::fprintf(f, "%d %d ", layer, pos0 + t);
    for (int j = 0; j < k; ++j) std::fprintf(f, j ? ",%d" : "%d", ch[j]);
    std::fprintf(f, " %.9g\n", p[ch[k - 1]] - best_out);
  }
}

}  // namespace clover::backend
