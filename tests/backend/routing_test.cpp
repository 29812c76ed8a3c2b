// Expert routing (backend/routing.h) against a plain restatement of its rules on random router
// logits, near ties included: probabilities are a softmax, the chosen experts are the k most
// probable with ties to the lower id, the weights renormalise over the chosen, and the grouping
// by expert covers every (token, slot) pair once, in token order within an expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "backend/routing.h"

namespace clover::backend {
namespace {

TEST(Routing, ChoosesTheKMostProbableWithTiesToTheLowerIdAndRenormalises) {
  std::mt19937 rng(11);
  for (int NE : {4, 16, 61, 256})
    for (int k : {1, 2, 8}) {
      if (k > NE) continue;
      const int T = 13;
      std::vector<float> logits(static_cast<size_t>(T) * NE);
      std::normal_distribution<float> nd(0.f, 2.f);
      for (auto& x : logits) x = nd(rng);
      // Exact ties: token 3 has all equal logits; token 5 repeats a few values.
      std::fill(logits.begin() + 3 * NE, logits.begin() + 4 * NE, 0.5f);
      for (int e = 0; e < NE; ++e) logits[5 * NE + e] = static_cast<float>(e % 3);
      std::vector<float> probs = logits;
      std::vector<int32_t> chosen(static_cast<size_t>(T) * k);
      std::vector<float> weight(static_cast<size_t>(T) * k);
      route_tokens(probs.data(), T, NE, k, chosen.data(), weight.data());
      for (int t = 0; t < T; ++t) {
        const float* p = &probs[static_cast<size_t>(t) * NE];
        const double sum = std::accumulate(p, p + NE, 0.0);
        EXPECT_NEAR(sum, 1.0, 1e-5) << "token " << t;
        // Softmax: probabilities in the order of the logits.
        const float mx = *std::max_element(&logits[t * NE], &logits[t * NE] + NE);
        for (int e = 0; e < NE; ++e)
          EXPECT_NEAR(p[e], std::exp(logits[t * NE + e] - mx) / [&] {
            double s = 0;
            for (int f = 0; f < NE; ++f) s += std::exp(logits[t * NE + f] - mx);
            return s;
          }(), 1e-6);
        // The rule: sort by probability descending, ties by id ascending, take k.
        std::vector<int32_t> ids(NE);
        std::iota(ids.begin(), ids.end(), 0);
        std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return p[a] > p[b]; });
        double wsum = 0;
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(chosen[t * k + j], ids[j]) << "token " << t << " slot " << j << " (NE " << NE << ", k " << k << ")";
          wsum += p[ids[j]];
        }
        for (int j = 0; j < k; ++j) EXPECT_NEAR(weight[t * k + j], p[ids[j]] / wsum, 1e-6);
      }

      ExpertGroups g;
      g.group(chosen.data(), T, k, NE);
      ASSERT_EQ(g.n_rows, T * k);
      std::vector<int> seen(T * k, 0);
      for (int e = 0; e < NE; ++e) {
        int prev = -1;
        for (int r = g.first[e]; r < g.first[e] + g.count[e]; ++r) {
          const int t = g.token[r];
          EXPECT_GT(t, prev) << "rows of expert " << e << " are in token order";
          prev = t;
          // The row's (token, slot) points back to it.
          int slot = -1;
          for (int j = 0; j < k; ++j)
            if (chosen[t * k + j] == e) slot = j;
          ASSERT_GE(slot, 0);
          EXPECT_EQ(g.row_of[t * k + slot], r);
          ++seen[r];
        }
      }
      for (int r = 0; r < T * k; ++r) EXPECT_EQ(seen[r], 1) << "row " << r;
      std::vector<uint8_t> scratch;
      std::vector<bool> used(NE, false);
      for (int i = 0; i < 4 * k; ++i) used[chosen[3 * k + i]] = true;  // tokens 3..6
      EXPECT_EQ(distinct_experts(chosen.data(), 3, 7, k, NE, scratch), std::count(used.begin(), used.end(), true));
    }
}

TEST(Routing, TraceNamesLayerPositionExpertsAndMargin) {
  const int NE = 4, k = 2;
  std::vector<float> probs = {1.f, 3.f, 2.f, 0.f};
  std::vector<int32_t> chosen(k);
  std::vector<float> w(k);
  route_tokens(probs.data(), 1, NE, k, chosen.data(), w.data());
  char buf[256] = {};
  std::FILE* f = fmemopen(buf, sizeof buf, "w");
  write_routing_trace(f, 7, 40, probs.data(), chosen.data(), 1, NE, k);
  std::fclose(f);
  float margin = 0;
  int layer = 0, pos = 0, e1 = 0, e2 = 0;
  ASSERT_EQ(std::sscanf(buf, "%d %d %d,%d %f", &layer, &pos, &e1, &e2, &margin), 5) << buf;
  EXPECT_EQ(layer, 7);
  EXPECT_EQ(pos, 40);
  EXPECT_EQ(e1, 1);
  EXPECT_EQ(e2, 2);
  EXPECT_NEAR(margin, probs[2] - probs[0], 1e-6);
}

}  // namespace
}  // namespace clover::backend
