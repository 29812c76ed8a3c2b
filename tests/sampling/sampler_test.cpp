// Sampler semantics on small hand-made rows: each filter, the penalties, the mask exclusion, the
// reported confidence, seeded reproducibility, and empirical frequencies against the expected
// distribution (Pearson chi-square with a fixed seed, so the test is deterministic).
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

namespace clover::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Softmax of z (double) restricted to `keep` (all tokens when empty).
std::vector<double> softmax(const std::vector<double>& z, const std::set<int32_t>& keep = {}) {
  std::vector<double> p(z.size(), 0.0);
  double m = -INFINITY, s = 0.0;
  for (size_t i = 0; i < z.size(); ++i)
    if (keep.empty() || keep.count(int32_t(i))) m = std::max(m, z[i]);
  for (size_t i = 0; i < z.size(); ++i)
    if (keep.empty() || keep.count(int32_t(i))) s += (p[i] = std::exp(z[i] - m));
  for (double& v : p) v /= s;
  return p;
}

std::vector<double> scaled(const std::vector<float>& logits, double temperature) {
  std::vector<double> z(logits.size());
  for (size_t i = 0; i < z.size(); ++i) z[i] = logits[i] / temperature;
  return z;
}

// logits whose softmax at temperature 1 is `probs`.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}

SamplingParams with_temperature(float t, uint64_t seed = 7) {
  SamplingParams p;
  p.temperature = t;
  p.seed = seed;
  return p;
}

// Draws n tokens; checks each reported probability against `expected` and returns the counts.
std::vector<int> draw(Sampler& s, const std::vector<float>& logits, int n, const std::vector<double>& expected,
                      std::span<const int32_t> history = {}, int32_t exclude = -1) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    Sampler::Choice c = s.sample(logits.data(), history, exclude);
    EXPECT_GE(c.token, 0);
    EXPECT_LT(c.token, int32_t(logits.size()));
    EXPECT_GT(expected[c.token], 0.0) << "token " << c.token << " should have been filtered out";
    EXPECT_NEAR(c.prob, expected[c.token], 1e-12);
    EXPECT_NEAR(c.logprob, std::log(expected[c.token]), 1e-9);
    ++counts[c.token];
  }
  return counts;
}

// Pearson chi-square of counts against probabilities (cells with p = 0 must be empty); compared with
// the 0.999 quantile of chi-square with df = cells - 1.
void expect_fits(const std::vector<int>& counts, const std::vector<double>& expected, int n) {
  static const double kCritical999[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};
  double chi2 = 0.0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i;
      continue;
    }
    const double e = expected[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  ASSERT_GE(cells, 1);
  ASSERT_LT(cells, 11);
  if (cells > 1) {
    EXPECT_LT(chi2, kCritical999[cells - 1]) << "chi-square with df " << cells - 1;
  }
}

// ---- greedy ----

TEST(Greedy, PicksArgmaxWithSoftmaxConfidenceAtTemperatureOne) {
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.5f};
  Sampler s(with_temperature(0.0f), 4);
  Sampler::Choice c = s.sample(l.data());
  std::vector<double> p = softmax(scaled(l, 1.0));
  EXPECT_EQ(c.token, 1);
  EXPECT_NEAR(c.prob, p[1], 1e-15);
  EXPECT_NEAR(c.logprob, std::log(p[1]), 1e-15);
}

TEST(Greedy, IgnoresFiltersAndNegativeTemperature) {
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.5f};
  SamplingParams p = with_temperature(-1.0f);
  p.top_k = 1;
  p.top_p = 0.1f;
  Sampler s(p, 4);
  Sampler::Choice c = s.sample(l.data());
  EXPECT_EQ(c.token, 1);
  EXPECT_NEAR(c.prob, softmax(scaled(l, 1.0))[1], 1e-15);  // whole row, not the filtered one
}

TEST(Greedy, TiesGoToTheLowestId) {
  Sampler s(with_temperature(0.0f), 4);
  std::vector<float> l = {1.0f, 5.0f, 5.0f, 5.0f};
  EXPECT_EQ(s.sample(l.data()).token, 1);
  EXPECT_NEAR(s.sample(l.data()).prob, softmax(scaled(l, 1.0))[1], 1e-15);
  std::vector<float> flat(4, 0.0f);
  EXPECT_EQ(s.sample(flat.data()).token, 0);
  EXPECT_EQ(s.sample(l.data(), {}, 1).token, 2);
}

TEST(Greedy, ConfidenceNearOneKeepsItsLogprob) {
  Sampler s(with_temperature(0.0f), 2);
  std::vector<float> l = {0.0f, 40.0f};
  Sampler::Choice c = s.sample(l.data());
  EXPECT_EQ(c.token, 1);
  EXPECT_EQ(c.prob, 1.0);                                     // rounds to 1 in double
  EXPECT_NEAR(c.logprob / -std::exp(-40.0), 1.0, 1e-12);      // but log p = -4.25e-18 survives
  std::vector<float> huge = {1000.0f, 0.0f};
  Sampler::Choice h = s.sample(huge.data());
  EXPECT_EQ(h.token, 0);
  EXPECT_TRUE(std::isfinite(h.logprob));
  EXPECT_LE(h.logprob, 0.0);
}

// ---- temperature and filters ----

TEST(Temperature, EmpiricalDistributionMatchesSoftmaxOfScaledLogits) {
  std::vector<float> l = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f};
  const int n = 100000;
  for (float t : {0.7f, 1.0f, 1.8f}) {
    Sampler s(with_temperature(t, 42), 5);
    std::vector<double> p = softmax(scaled(l, t));
    expect_fits(draw(s, l, n, p), p, n);
  }
}

TEST(TopK, KeepsTheKLargestAndRenormalises) {
  std::vector<float> l = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f};
  SamplingParams p = with_temperature(1.0f);
  p.top_k = 2;
  Sampler s(p, 5);
  std::vector<double> expected = softmax(scaled(l, 1.0), {3, 4});
  const int n = 20000;
  expect_fits(draw(s, l, n, expected), expected, n);
}

TEST(TopK, TiesAtTheBoundaryKeepTheLowestIds) {
  std::vector<float> l = {1.0f, 1.0f, 1.0f, 0.0f};
  SamplingParams p = with_temperature(1.0f);
  p.top_k = 2;
  Sampler s(p, 4);
  std::vector<double> expected = softmax(scaled(l, 1.0), {0, 1});
  const int n = 5000;
  expect_fits(draw(s, l, n, expected), expected, n);
}

TEST(TopP, KeepsTheSmallestPrefixReachingP) {
  std::vector<float> l = logits_of({0.5, 0.3, 0.15, 0.05});
  struct Case {
    float top_p;
    std::set<int32_t> kept;
  };
  for (const Case& c : {Case{0.75f, {0, 1}}, Case{0.85f, {0, 1, 2}}, Case{0.0f, {0}}, Case{0.99f, {0, 1, 2, 3}}}) {
    SamplingParams p = with_temperature(1.0f);
    p.top_p = c.top_p;
    Sampler s(p, 4);
    std::vector<double> expected = softmax(scaled(l, 1.0), c.kept);
    const int n = 20000;
    expect_fits(draw(s, l, n, expected), expected, n);
  }
}

TEST(TopP, AppliesAfterTheTemperature) {
  // At T = 0.5 the probabilities are p^2 / sum = {0.685, 0.247, 0.062, 0.007}: top_p 0.9 keeps two
  // tokens. (llama.cpp's chain, temperature last, would keep three: 0.5 + 0.3 < 0.9.)
  std::vector<float> l = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingParams p = with_temperature(0.5f);
  p.top_p = 0.9f;
  Sampler s(p, 4);
  std::vector<double> expected = softmax(scaled(l, 0.5), {0, 1});
  const int n = 20000;
  expect_fits(draw(s, l, n, expected), expected, n);
}

TEST(TopP, LargeVocabularyMatchesAFullSort) {
  const int32_t n_vocab = 50000;
  for (float spread : {1.0f, 2.0f}) {
    std::mt19937_64 gen(3);
    std::normal_distribution<float> normal(0.0f, spread);
    std::vector<float> l(n_vocab);
    for (float& v : l) v = normal(gen);
    SamplingParams p = with_temperature(0.8f, 11);
    p.top_p = 0.9f;
    Sampler s(p, n_vocab);

    std::vector<double> z = scaled(l, 0.8f);
    std::vector<double> all = softmax(z);
    std::vector<int32_t> order(n_vocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    std::set<int32_t> kept;
    double cum = 0.0;
    for (int32_t id : order) {
      kept.insert(id);
      cum += all[id];
      if (cum >= 0.9) break;
    }
    ASSERT_GT(kept.size(), 64u) << "spread " << spread;  // more than the final sort in one bucket
    std::vector<double> expected = softmax(z, kept);
    for (int i = 0; i < 300; ++i) {
      Sampler::Choice c = s.sample(l.data());
      ASSERT_TRUE(kept.count(c.token)) << c.token << " spread " << spread;
      EXPECT_NEAR(c.prob / expected[c.token], 1.0, 1e-9);
    }
  }
}

TEST(TopP, TiesAtTheCutKeepTheLowestIds) {
  // 1000 equal logits: one bucket, found by the quickselect; top_p 0.5 keeps ids 0..499.
  std::vector<float> l(1000, 0.25f);
  SamplingParams p = with_temperature(1.0f, 3);
  p.top_p = 0.5f;
  Sampler s(p, 1000);
  for (int i = 0; i < 2000; ++i) {
    Sampler::Choice c = s.sample(l.data());
    ASSERT_LT(c.token, 500);
    EXPECT_NEAR(c.prob, 1.0 / 500, 1e-15);
  }
}

TEST(MinP, KeepsTokensAboveAFractionOfTheMaximum) {
  std::vector<float> l = logits_of({0.5, 0.3, 0.15, 0.05});
  struct Case {
    float min_p;
    std::set<int32_t> kept;
  };
  for (const Case& c : {Case{0.25f, {0, 1, 2}}, Case{0.7f, {0}}, Case{0.05f, {0, 1, 2, 3}}}) {
    SamplingParams p = with_temperature(1.0f);
    p.min_p = c.min_p;
    Sampler s(p, 4);
    std::vector<double> expected = softmax(scaled(l, 1.0), c.kept);
    const int n = 20000;
    expect_fits(draw(s, l, n, expected), expected, n);
  }
}

TEST(Filters, ApplyInOrderTopKThenTopPThenMinP) {
  // probabilities 0.4 0.2 0.15 0.1 0.08 0.07; top_k 4 -> {0.4 .2 .15 .1}/0.85 = {.47 .235 .176 .118};
  // top_p 0.8 -> {0, 1, 2} (cum .882); min_p 0.4 of 0.47/... drops token 2 (.176/.47 = .375).
  std::vector<float> l = logits_of({0.4, 0.2, 0.15, 0.1, 0.08, 0.07});
  SamplingParams p = with_temperature(1.0f);
  p.top_k = 4;
  p.top_p = 0.8f;
  p.min_p = 0.4f;
  Sampler s(p, 6);
  std::vector<double> expected = softmax(scaled(l, 1.0), {0, 1});
  const int n = 20000;
  expect_fits(draw(s, l, n, expected), expected, n);
}

// ---- penalties ----

TEST(Penalties, PresenceAndFrequencyFollowOpenAI) {
  // logit -= count * frequency + (count > 0) * presence, over the whole history.
  std::vector<float> l = {0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<int32_t> history = {0, 0, 1, 0};
  SamplingParams p = with_temperature(1.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repeat_last_n = 1;  // the repeat penalty is off (1.0); its window must not limit these
  Sampler s(p, 4);
  std::vector<double> expected = softmax({-(3 * 0.25 + 0.5), -(0.25 + 0.5), 0.0, 0.0});
  const int n = 20000;
  expect_fits(draw(s, l, n, expected, history), expected, n);
  // Negative penalties encourage repetition.
  p.presence_penalty = -1.0f;
  p.frequency_penalty = 0.0f;
  p.temperature = 0.0f;
  Sampler g(p, 4);
  Sampler::Choice c = g.sample(l.data(), history);
  EXPECT_EQ(c.token, 0);
  EXPECT_NEAR(c.prob, softmax({1.0, 1.0, 0.0, 0.0})[0], 1e-12);
}

TEST(LogitBias, AddsToTheLogitsAfterThePenalties) {
  std::vector<float> l = {0.0f, 1.0f, 0.5f, 0.0f};
  std::vector<int32_t> history = {1};
  SamplingParams p = with_temperature(1.0f);
  p.presence_penalty = 0.5f;
  p.logit_bias = {{0, 2.0f}, {3, -1.0f}};
  Sampler s(p, 4);
  std::vector<double> expected = softmax({2.0, 0.5, 0.5, -1.0});
  const int n = 20000;
  expect_fits(draw(s, l, n, expected, history), expected, n);
  // Greedy: -100 bans the argmax, +100 forces an unlikely token; the raw log-probability (OpenAI
  // logprobs) ignores the bias.
  p = with_temperature(0.0f);
  p.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(Sampler(p, 4).sample(l.data()).token, 2);
  p.logit_bias = {{3, 100.0f}};
  Sampler forced(p, 4);
  EXPECT_EQ(forced.sample(l.data()).token, 3);
  EXPECT_NEAR(forced.raw_logprob(l.data(), 3), std::log(softmax({0.0, 1.0, 0.5, 0.0})[3]), 1e-12);
  // The bias changes logits a selection does not see: the whole row is needed.
  EXPECT_EQ(forced.top_needed(), 0);
}

TEST(LogitBias, TokensOutsideTheVocabularyAndNonFiniteBiasesAreRejected) {
  SamplingParams p;
  p.logit_bias = {{4, 1.0f}};
  EXPECT_THROW(Sampler(p, 4), std::invalid_argument);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(Sampler(p, 4), std::invalid_argument);
  p.logit_bias = {{0, std::nanf("")}};
  EXPECT_THROW(Sampler(p, 4), std::invalid_argument);
  p.logit_bias = {{3, -kInf}};
  EXPECT_THROW(Sampler(p, 4), std::invalid_argument);
}

TEST(Penalties, RepeatPenaltyFollowsLlamaCppOverTheLastN) {
  // positive logits are divided by the penalty, negative ones multiplied; each token once.
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f};
  std::vector<int32_t> history = {2, 0, 1, 0, 1};
  struct Case {
    int32_t last_n;
    std::vector<double> penalised;
  };
  for (const Case& c : {Case{64, {1.0, -4.0, 0.5, 0.5}}, Case{-1, {1.0, -4.0, 0.5, 0.5}},
                        Case{2, {1.0, -4.0, 1.0, 0.5}}, Case{1, {2.0, -4.0, 1.0, 0.5}},
                        Case{0, {2.0, -2.0, 1.0, 0.5}}}) {
    SamplingParams p = with_temperature(1.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = c.last_n;
    Sampler s(p, 4);
    std::vector<double> expected = softmax(c.penalised);
    draw(s, l, 200, expected, history);
  }
}

TEST(Penalties, RepeatThenPresenceOnTheSameLogit) {
  std::vector<float> l = {2.0f, 0.0f};
  std::vector<int32_t> history = {0};
  SamplingParams p = with_temperature(0.0f);
  p.repeat_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  Sampler s(p, 2);
  Sampler::Choice c = s.sample(l.data(), history);
  EXPECT_EQ(c.token, 0);
  EXPECT_NEAR(c.logprob, std::log(softmax({2.0 / 2.0 - 0.5, 0.0})[0]), 1e-12);
}

TEST(Penalties, DoNotLeakIntoTheNextCallAndIgnoreForeignIds) {
  std::vector<float> l = {1.0f, 1.0f, 0.0f};
  std::vector<int32_t> history = {0, 0, -5, 3, 99};
  SamplingParams p = with_temperature(0.0f);
  p.frequency_penalty = 1.0f;
  p.repeat_penalty = 1.5f;
  Sampler s(p, 3);
  EXPECT_EQ(s.sample(l.data(), history).token, 1);
  Sampler::Choice again = s.sample(l.data());
  EXPECT_EQ(again.token, 0);
  EXPECT_NEAR(again.prob, softmax({1.0, 1.0, 0.0})[0], 1e-15);
}

// ---- mask exclusion ----

TEST(Exclusion, NeverChosenButKeepsItsProbabilityMass) {
  std::vector<float> l = {5.0f, 0.0f, 0.0f, -1.0f};
  Sampler s(with_temperature(1.0f, 5), 4);
  std::vector<double> full = softmax(scaled(l, 1.0));
  std::vector<int> counts(4, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    Sampler::Choice c = s.sample(l.data(), {}, 0);
    ASSERT_NE(c.token, 0);
    EXPECT_NEAR(c.prob, full[c.token], 1e-15);  // its own probability, not renormalised
    ++counts[c.token];
  }
  std::vector<double> conditional = softmax(scaled(l, 1.0), {1, 2, 3});
  expect_fits(counts, conditional, n);
}

TEST(Exclusion, BestOtherTokenWhenTheFiltersKeepOnlyTheMask) {
  std::vector<float> l = {5.0f, 1.0f, 2.0f};
  SamplingParams p = with_temperature(1.0f);
  p.top_k = 1;
  Sampler s(p, 3);
  Sampler::Choice c = s.sample(l.data(), {}, 0);
  EXPECT_EQ(c.token, 2);
  EXPECT_NEAR(c.prob, softmax({5.0, 2.0})[1], 1e-15);
  p.top_k = 0;
  p.top_p = 0.5f;
  Sampler t(p, 3);
  EXPECT_EQ(t.sample(l.data(), {}, 0).token, 2);
}

TEST(Exclusion, NothingSelectableThrows) {
  Sampler greedy(with_temperature(0.0f), 2);
  Sampler sampled(with_temperature(1.0f), 2);
  std::vector<float> l = {1.0f, -kInf};
  EXPECT_THROW(greedy.sample(l.data(), {}, 0), std::invalid_argument);
  EXPECT_THROW(sampled.sample(l.data(), {}, 0), std::invalid_argument);
  std::vector<float> nan = {std::nanf(""), -kInf};
  EXPECT_THROW(sampled.sample(nan.data()), std::invalid_argument);
}

TEST(Exclusion, NaNAndMinusInfinityAreNeverChosen) {
  std::vector<float> l = {std::nanf(""), 1.0f, -kInf, 0.0f};
  Sampler s(with_temperature(1.0f, 9), 4);
  std::vector<double> expected = softmax({-INFINITY, 1.0, -INFINITY, 0.0});
  expect_fits(draw(s, l, 5000, expected), expected, 5000);
  Sampler g(with_temperature(0.0f), 4);
  EXPECT_EQ(g.sample(l.data()).token, 1);
}

// ---- RNG ----

TEST(Seed, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> l = {0.0f, 0.3f, 0.1f, 0.2f, -0.1f, 0.05f};
  SamplingParams p = with_temperature(1.0f, 1234);
  p.top_p = 0.95f;
  Sampler a(p, 6), b(p, 6);
  p.seed = 1235;
  Sampler c(p, 6);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 500; ++i) {
    ta.push_back(a.sample(l.data()).token);
    tb.push_back(b.sample(l.data()).token);
    tc.push_back(c.sample(l.data()).token);
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  a.reseed(1234);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(a.sample(l.data()).token, ta[i]) << i;
}

TEST(Seed, GoldenSequenceIsStableAcrossBuilds) {
  // mt19937_64 is fully specified and the [0, 1) mapping is our own, so these ids must not change.
  std::vector<float> l = {0.0f, 0.5f, 1.0f, 1.5f};
  Sampler s(with_temperature(1.0f, 2024), 4);
  std::vector<int32_t> got;
  for (int i = 0; i < 12; ++i) got.push_back(s.sample(l.data()).token);
  std::mt19937_64 rng(2024);
  std::vector<double> p = softmax(scaled(l, 1.0));
  std::vector<int32_t> want;
  for (int i = 0; i < 12; ++i) {
    double u = double(rng() >> 11) * 0x1.0p-53, acc = 0.0;
    int32_t t = 3;
    for (int32_t j = 0; j < 4; ++j)
      if ((acc += p[j]) > u) {
        t = j;
        break;
      }
    want.push_back(t);
  }
  EXPECT_EQ(got, want);
}

// ---- selection on the backend: choosing from a RowTop as from the whole row ----

// Random rows over a 5,000-token vocabulary with a few spikes, ties, -inf and NaN entries.
std::vector<float> spiky_row(std::mt19937& rng, int V) {
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> row(V);
  for (float& x : row) x = n(rng);
  for (int i = 0; i < 6; ++i) row[rng() % V] = 8.0f + static_cast<float>(rng() % 4);  // ties among spikes
  row[rng() % V] = -kInf;
  row[rng() % V] = std::nanf("");
  return row;
}

SamplingParams make_params(float temperature, int top_k, float top_p, float min_p, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.seed = seed;
  return p;
}

TEST(SampleTop, GivesTheSameChoicesAsTheWholeRow) {
  const int V = 5000;
  std::mt19937 rng(7);
  // Greedy, and draws with top_k (with top_p, min_p), each with and without an excluded token.
  const std::vector<SamplingParams> cases = {make_params(0.0f, 0, 1.0f, 0.0f, 1),   make_params(0.8f, 40, 0.95f, 0.05f, 2),
                                             make_params(1.0f, 1, 1.0f, 0.0f, 3),   make_params(1.3f, 20, 1.0f, 0.0f, 4),
                                             make_params(0.6f, 63, 0.9f, 0.0f, 5), make_params(2.0f, 5, 1.0f, 0.5f, 6)};
  for (const SamplingParams& p : cases) {
    Sampler from_row(p, V), from_top(p, V);
    ASSERT_GT(from_top.top_needed(), 0);
    for (int i = 0; i < 200; ++i) {
      const std::vector<float> row = spiky_row(rng, V);
      RowTop top;
      select_top_ref(row.data(), V, from_top.top_needed(), top);
      // The excluded token: sometimes the best one (the fallback), sometimes another, sometimes none.
      const int32_t exclude = i % 3 == 0 ? top.top[0].id : i % 3 == 1 ? static_cast<int32_t>(rng() % V) : -1;
      const Sampler::Choice a = from_row.sample(row.data(), {}, exclude), b = from_top.sample_top(top, exclude);
      ASSERT_EQ(a.token, b.token) << "temperature " << p.temperature << ", top_k " << p.top_k << ", row " << i;
      ASSERT_EQ(a.logprob, b.logprob) << "temperature " << p.temperature << ", top_k " << p.top_k << ", row " << i;
    }
  }
}

TEST(SampleTop, NeedsTheWholeRowWithPenaltiesOrAnUnboundedDraw) {
  SamplingParams p = make_params(0.0f, 0, 1.0f, 0.0f, 1);
  EXPECT_EQ(Sampler(p, 100).top_needed(), 2);
  p.presence_penalty = 0.5f;
  EXPECT_EQ(Sampler(p, 100).top_needed(), 0);
  p = make_params(0.8f, 0, 0.95f, 0.0f, 1);  // no top_k: the nucleus may hold any number of tokens
  EXPECT_EQ(Sampler(p, 100).top_needed(), 0);
  p.top_k = kMaxTop;  // top_k + 1 entries would not fit a RowTop
  EXPECT_EQ(Sampler(p, 100).top_needed(), 0);
  p.top_k = 40;
  EXPECT_EQ(Sampler(p, 100).top_needed(), 41);
  p.repeat_penalty = 1.1f;
  EXPECT_EQ(Sampler(p, 100).top_needed(), 0);
}

TEST(SampleTop, ReferenceSelectionOrdersTiesAndSkipsNaN) {
  const std::vector<float> row = {1.0f, std::nanf(""), 3.0f, 3.0f, -kInf, 2.0f, 3.0f};
  RowTop t;
  select_top_ref(row.data(), static_cast<int64_t>(row.size()), 64, t);
  ASSERT_EQ(t.n, 6);  // every entry but the NaN
  const std::vector<int32_t> ids = {2, 3, 6, 5, 0, 4};
  for (int i = 0; i < t.n; ++i) EXPECT_EQ(t.top[i].id, ids[i]) << i;
  EXPECT_EQ(t.max_logit, 3.0f);
  // log1p of exp(0) + exp(0) + exp(-1) + exp(-2) (the first maximum is not in the rest).
  EXPECT_NEAR(t.log1p_rest, std::log1p(2.0 + std::exp(-1.0) + std::exp(-2.0)), 1e-12);
}

// ---- top candidates / raw log-probabilities ----

TEST(TopCandidates, BestFirstTiesToLowestIdWithRawLogprobs) {
  std::vector<float> l = {1.0f, 3.0f, 3.0f, 2.0f, -kInf};
  Sampler s(with_temperature(0.7f), 5);
  std::vector<double> p = softmax(scaled(l, 1.0));
  std::vector<TokenLogprob> out;
  s.top_candidates(l.data(), 3, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_EQ(out[1].token, 2);
  EXPECT_EQ(out[2].token, 3);
  for (const TokenLogprob& t : out) EXPECT_NEAR(t.logprob, std::log(p[t.token]), 1e-12);

  s.top_candidates(l.data(), 3, out, 1);  // excluded, not renormalised
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].token, 2);
  EXPECT_EQ(out[2].token, 0);
  EXPECT_NEAR(out[0].logprob, std::log(p[2]), 1e-12);

  s.top_candidates(l.data(), 100, out);  // clamped to the vocabulary
  ASSERT_EQ(out.size(), 5u);
  double total = 0.0;
  for (const TokenLogprob& t : out) total += std::exp(t.logprob);
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_EQ(out[4].token, 4);
  EXPECT_EQ(out[4].logprob, -INFINITY);
  s.top_candidates(l.data(), 0, out);
  EXPECT_TRUE(out.empty());
}

TEST(TopCandidates, RawLogprobIgnoresPenaltiesAndTemperature) {
  std::vector<float> l = {0.5f, 2.0f, -1.0f};
  SamplingParams p = with_temperature(0.3f);
  p.presence_penalty = 2.0f;
  Sampler s(p, 3);
  std::vector<double> raw = softmax(scaled(l, 1.0));
  for (int32_t t = 0; t < 3; ++t) EXPECT_NEAR(s.raw_logprob(l.data(), t), std::log(raw[t]), 1e-12);
  EXPECT_THROW(s.raw_logprob(l.data(), 3), std::out_of_range);
}

// ---- parameters ----

TEST(Params, OutOfRangeValuesAreRejected) {
  auto make = [](auto edit) {
    SamplingParams p;
    edit(p);
    return Sampler(p, 8);
  };
  EXPECT_THROW(Sampler(SamplingParams{}, 0), std::invalid_argument);
  EXPECT_THROW(make([](SamplingParams& p) { p.top_p = 1.5f; }), std::invalid_argument);
  EXPECT_THROW(make([](SamplingParams& p) { p.min_p = -0.1f; }), std::invalid_argument);
  EXPECT_THROW(make([](SamplingParams& p) { p.repeat_penalty = 0.0f; }), std::invalid_argument);
  EXPECT_THROW(make([](SamplingParams& p) { p.repeat_last_n = -2; }), std::invalid_argument);
  EXPECT_THROW(make([](SamplingParams& p) { p.temperature = std::nanf(""); }), std::invalid_argument);
  EXPECT_NO_THROW(make([](SamplingParams& p) { p.top_k = -1; }));
}

TEST(Params, TinyTemperatureBehavesLikeGreedy) {
  std::vector<float> l = {1.0f, 1.5f, 1.49f, -3.0f};
  for (float top_p : {1.0f, 0.9f}) {
    SamplingParams p = with_temperature(1e-30f);
    p.top_p = top_p;  // z differences of ~1e30 must not overflow the top-p buckets
    Sampler s(p, 4);
    for (int i = 0; i < 50; ++i) {
      Sampler::Choice c = s.sample(l.data());
      EXPECT_EQ(c.token, 1);
      EXPECT_NEAR(c.prob, 1.0, 1e-12);
    }
  }
}

}  // namespace
}  // namespace clover::sampling
