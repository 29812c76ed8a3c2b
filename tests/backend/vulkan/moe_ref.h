// The CPU's MoE routing and grouping of one pass, written out step for step as Forward::moe_layer
// does them inline (model/moe.cpp), for the router and MoE op tests.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/vecmath.h"

namespace clover::vulkan::test {

// One token: softmax, top-k with ties to the lower id, renormalised weights. margin: the
// smallest gap between neighbours in the order down to the (k+1)-th (0 at an exact tie).
inline void route_ref(const float* logits, int ne, int k, int32_t* ids, float* w, float* margin) {
  std::vector<float> p(logits, logits + ne);
  const float mx = *std::max_element(p.begin(), p.end());
  const float inv_sum = static_cast<float>(1.0 / kernels::softmax_exp_row(p.data(), p.data(), ne, mx));
  for (float& v : p) v *= inv_sum;
  for (int j = 0; j < k; ++j) ids[j] = -1;
  for (int e = 0; e < ne; ++e) {
    int pos = k;
    while (pos > 0 && (ids[pos - 1] < 0 || p[e] > p[ids[pos - 1]])) --pos;
    if (pos < k) {
      for (int j = k - 1; j > pos; --j) ids[j] = ids[j - 1];
      ids[pos] = e;
    }
  }
  double wsum_d = 0.0;
  for (int j = 0; j < k; ++j) wsum_d += p[ids[j]];
  const float wsum = std::max(static_cast<float>(wsum_d), 6.103515625e-5f);
  for (int j = 0; j < k; ++j) w[j] = p[ids[j]] / wsum;
  std::vector<float> sorted = p;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  *margin = k < ne ? sorted[k - 1] - sorted[k] : 1.0f;
  for (int j = 0; j + 1 < k; ++j) *margin = std::min(*margin, sorted[j] - sorted[j + 1]);
}

// The groups buffer moe_group.comp writes: count | first | token | row_of.
inline std::vector<int32_t> group_ref(const std::vector<int32_t>& ids, int tokens, int ne, int k) {
  std::vector<int32_t> g(static_cast<size_t>(2 * ne + 2 * tokens * k), 0);
  for (int32_t e : ids) ++g[e];
  int32_t next = 0;
  for (int e = 0; e < ne; ++e) {
    g[ne + e] = next;
    next += g[e];
  }
  std::vector<int32_t> fill(ne, 0);
  for (int i = 0; i < tokens * k; ++i) {
    const int e = ids[i];
    const int32_t row = g[ne + e] + fill[e]++;
    g[2 * ne + row] = i / k;
    g[2 * ne + tokens * k + i] = row;
  }
  return g;
}

}  // namespace clover::vulkan::test
