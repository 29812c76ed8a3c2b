// The engine API end to end on a tiny synthetic model: generation, stop strings, finish reasons,
// prefix reuse, sampling reproducibility and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "clover/clover.h"
#include "engine/stop_strings.h"
#include "tiny_engine.h"

namespace clover {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 256;
    tiny_ = new testing::TinyEngine(o);
    engine_ = tiny_->engine.get();
    path_ = tiny_->path;
  }
  static void TearDownTestSuite() { delete tiny_; }
  static std::vector<int32_t> prompt() { return engine_->tokenize("The quick brown fox jumps over the lazy dog.", false); }

  static inline testing::TinyEngine* tiny_ = nullptr;
  static inline std::string path_;
  static inline Engine* engine_ = nullptr;
};

TEST_F(EngineTest, GreedyGenerationFollowsTheArgmaxOfEachStep) {
  auto s = engine_->new_session();
  GenerateOptions go;
  go.max_tokens = 12;
  go.ignore_eos = true;
  std::vector<int32_t> got;
  Event last = s->generate(prompt(), go, [&](const Event& e) {
    got.insert(got.end(), e.tokens.begin(), e.tokens.end());
    return true;
  });
  EXPECT_EQ(last.finish, FinishReason::Length);
  ASSERT_EQ(got.size(), 12u);
  EXPECT_EQ(last.stats.generated_tokens, 12);

  // The same chain by hand with eval().
  auto s2 = engine_->new_session();
  std::vector<float> logits = s2->eval(prompt(), false);
  for (int i = 0; i < 12; ++i) {
    const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(best, got[i]) << "step " << i;
    logits = s2->eval(std::span<const int32_t>(&got[i], 1), false);
  }
}

// Session::denoise with a list of block positions returns exactly those rows of the full pass, in
// order, and leaves the session as it was; bad rows are a clear error.
TEST_F(EngineTest, DenoiseReturnsTheRequestedRows) {
  ASSERT_TRUE(engine_->info().can_denoise);
  auto s = engine_->new_session();
  s->eval(prompt(), false);
  const int n_past = s->n_past();
  const size_t V = static_cast<size_t>(engine_->info().n_vocab);
  std::vector<int32_t> block(8, engine_->info().mask_token);
  block[0] = 11;
  block[5] = 40;
  const std::vector<float> full = s->denoise(block);
  ASSERT_EQ(full.size(), 8 * V);
  const std::vector<int32_t> rows{1, 2, 6};
  const std::vector<float> some = s->denoise(block, true, rows);
  ASSERT_EQ(some.size(), rows.size() * V);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t v = 0; v < V; ++v) ASSERT_EQ(some[i * V + v], full[rows[i] * V + v]) << "row " << rows[i];
  EXPECT_EQ(s->n_past(), n_past);
  const std::vector<int32_t> unordered{4, 2};
  EXPECT_THROW(s->denoise(block, true, unordered), Error);
}

namespace {

// The k best of a row of logits as (token, log-probability), best first, ties to the lower id.
std::vector<TopToken> top_of(std::span<const float> row, int k) {
  std::vector<int32_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  const float mx = row[ids[0]];
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - mx);
  std::vector<TopToken> out;
  for (int i = 0; i < k; ++i) out.push_back({ids[i], row[ids[i]] - mx - std::log(sum)});
  return out;
}

void expect_same_top(const std::vector<TopToken>& got, const std::vector<TopToken>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << what << " rank " << i;
    EXPECT_NEAR(got[i].logprob, want[i].logprob, 1e-4) << what << " rank " << i;
  }
}

}  // namespace

// eval_top and denoise_top (the benchmark's passes, selection on the backend) give the k best of
// the full logits with their log-probabilities, and advance the session as eval/denoise do.
TEST_F(EngineTest, TopTokensAreTheBestOfTheFullLogits) {
  const size_t V = static_cast<size_t>(engine_->info().n_vocab);
  auto full = engine_->new_session();
  auto top = engine_->new_session();
  const std::vector<float> last = full->eval(prompt(), false);
  expect_same_top(top->eval_top(prompt(), 5), top_of(last, 5), "eval_top");
  EXPECT_EQ(top->n_past(), full->n_past());

  std::vector<int32_t> block(8, engine_->info().mask_token);
  block[2] = 17;
  const std::vector<float> all = full->denoise(block);
  const std::vector<int32_t> rows{0, 3, 7};
  const auto some = top->denoise_top(block, rows, 3, true);
  ASSERT_EQ(some.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    expect_same_top(some[i], top_of(std::span<const float>(all).subspan(rows[i] * V, V), 3), "denoise_top row " + std::to_string(rows[i]));
  EXPECT_EQ(top->n_past(), full->n_past());
  EXPECT_THROW(top->eval_top(prompt(), 0), Error);
  EXPECT_THROW(top->denoise_top(block, rows, 65, true), Error);
}

TEST_F(EngineTest, SecondTurnReusesTheCachedPrefix) {
  auto s = engine_->new_session();
  GenerateOptions go;
  go.max_tokens = 4;
  go.ignore_eos = true;
  std::vector<int32_t> first = prompt();
  std::vector<int32_t> reply;
  Event e1 = s->generate(first, go, [&](const Event& e) {
    reply.insert(reply.end(), e.tokens.begin(), e.tokens.end());
    return true;
  });
  EXPECT_EQ(e1.stats.cached_tokens, 0);
  std::vector<int32_t> second = first;
  second.insert(second.end(), reply.begin(), reply.end());
  const std::vector<int32_t> more = engine_->tokenize(" And then?", false);
  second.insert(second.end(), more.begin(), more.end());
  Event e2 = s->generate(second, go, [](const Event&) { return true; });
  EXPECT_EQ(e2.stats.cached_tokens, static_cast<int>(first.size() + reply.size()));
  EXPECT_EQ(e2.stats.prompt_tokens, static_cast<int>(more.size()));

  // The reused state gives exactly what a fresh session computes.
  auto fresh = engine_->new_session();
  std::vector<int32_t> a, b;
  auto collect = [](std::vector<int32_t>& v) {
    return [&v](const Event& e) {
      v.insert(v.end(), e.tokens.begin(), e.tokens.end());
      return true;
    };
  };
  std::vector<int32_t> third = second;
  third.push_back(5);
  s->generate(third, go, collect(a));
  fresh->generate(third, go, collect(b));
  EXPECT_EQ(a, b);
}

TEST_F(EngineTest, SeededSamplingIsReproducible) {
  GenerateOptions go;
  go.max_tokens = 16;
  go.ignore_eos = true;
  go.sampling.temperature = 1.0f;
  go.sampling.top_p = 0.9f;
  go.sampling.seed = 1234;
  auto run = [&] {
    auto s = engine_->new_session();
    std::vector<int32_t> v;
    s->generate(prompt(), go, [&](const Event& e) {
      v.insert(v.end(), e.tokens.begin(), e.tokens.end());
      return true;
    });
    return v;
  };
  EXPECT_EQ(run(), run());
}

TEST_F(EngineTest, CancellingStopsGeneration) {
  auto s = engine_->new_session();
  GenerateOptions go;
  go.max_tokens = 50;
  go.ignore_eos = true;
  int events = 0;
  Event last = s->generate(prompt(), go, [&](const Event& e) { return e.finish != FinishReason::None || ++events < 3; });
  EXPECT_EQ(events, 3);
  EXPECT_EQ(last.stats.generated_tokens, 3);
}

TEST_F(EngineTest, ErrorsNameTheNumbers) {
  auto s = engine_->new_session();
  GenerateOptions go;
  go.max_tokens = 250;
  try {
    s->generate(prompt(), go, [](const Event&) { return true; });
    FAIL() << "no error for a request larger than the context";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("plus max_tokens (250) exceeds the context size (256 tokens)"), std::string::npos) << e.what();
  }
  go.max_tokens = 1;
  EXPECT_THROW(s->generate({}, go, [](const Event&) { return true; }), Error);
  EXPECT_THROW(Engine::load("/nonexistent/model.gguf"), Error);
}

// KV cache types through the API: names as llama.cpp spells them, the memory reported at load,
// and eval with a quantised cache close to the default one.
TEST_F(EngineTest, CacheTypesAndTheirMemory) {
  EXPECT_EQ(cache_type_from_name("Q8_0"), CacheType::Q8_0);
  EXPECT_EQ(cache_type_name(CacheType::F16), "f16");
  try {
    cache_type_from_name("q4_0");
    FAIL() << "q4_0 accepted as a cache type";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown KV cache type \"q4_0\" (use f32, f16 or q8_0)");
  }
  EXPECT_EQ(engine_->info().cache_type_k, "f16");  // the default, as llama.cpp's
  EngineOptions o;
  o.n_threads = 2;
  o.n_ctx = 256;
  o.cache_type_k = CacheType::F32;
  o.cache_type_v = CacheType::Q8_0;
  auto e = Engine::load(path_, o);
  // tiny: 1 attention layer, 2 KV heads x 64; 256 + 256 block-scratch positions; K f32 (512 bytes
  // per position), V q8_0 (2 heads x 2 blocks x 34 bytes = 136). GDN: 3 layers x (3 conv rows x 256
  // channels + 4 heads x 32 x 32) floats = 57 KiB.
  EXPECT_EQ(e->info().kv_cache_bytes, 512u * (512 + 136));
  EXPECT_EQ(context_summary(e->info()), "context 256 tokens, KV cache f32/q8_0 324.0 KiB per session, recurrent state 57.0 KiB");
  auto a = engine_->new_session(), b = e->new_session();
  const auto la = a->eval(prompt(), true), lb = b->eval(prompt(), true);
  ASSERT_EQ(la.size(), lb.size());
  float worst = 0;
  for (size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::abs(la[i] - lb[i]));
  EXPECT_LT(worst, 0.1f);
}

TEST(StopStrings, HoldsBackPrefixesAndCutsAtTheStop) {
  engine::StopStrings s({"</end>", "STOP"});
  std::string out;
  for (const char* piece : {"Hello ", "wor", "ld </e", "nd> ignored"}) out += s.push(piece);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(out, "Hello world ");

  engine::StopStrings t({"</end>"});
  std::string o2 = t.push("a </e");
  EXPECT_EQ(o2, "a ");
  o2 += t.push("x");
  o2 += t.flush();
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(o2, "a </ex");
}

}  // namespace
}  // namespace clover
