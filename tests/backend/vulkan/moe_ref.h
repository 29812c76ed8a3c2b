// The CPU's MoE routing and grouping (backend/routing.h, the unit every backend shares) in the
// shapes the router and MoE op tests compare with.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/routing.h"

namespace clover::vulkan::test {

// One token: softmax, top-k with ties to the lower id, renormalised weights. margin: the
// smallest gap between neighbours in the order down to the (k+1)-th (0 at an exact tie).
inline void route_ref(const float* logits, int ne, int k, int32_t* ids, float* w, float* margin) {
  std::vector<float> p(logits, logits + ne);
  backend::route_tokens(p.data(), 1, ne, k, ids, w);
  std::vector<float> sorted = p;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  *margin = k < ne ? sorted[k - 1] - sorted[k] : 1.0f;
  for (int j = 0; j + 1 < k; ++j) *margin = std::min(*margin, sorted[j] - sorted[j + 1]);
}

// The groups buffer moe_group.comp writes: count | first | token | row_of.
inline std::vector<int32_t> group_ref(const std::vector<int32_t>& ids, int tokens, int ne, int k) {
  backend::ExpertGroups g;
  g.group(ids.data(), tokens, k, ne);
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(3 * ne + 2 * tokens * k + 1));
  for (const auto* part : {&g.count, &g.first, &g.token, &g.row_of}) out.insert(out.end(), part->begin(), part->end());
  // n_active and the active list, ascending, padded with -1 to ne entries.
  std::vector<int32_t> active;
  for (int e = 0; e < ne; ++e)
    if (g.count[e] > 0) active.push_back(e);
  out.push_back(static_cast<int32_t>(active.size()));
  out.insert(out.end(), active.begin(), active.end());
  out.resize(out.size() + static_cast<size_t>(ne) - active.size(), -1);
  return out;
}

}  // namespace clover::vulkan::test
