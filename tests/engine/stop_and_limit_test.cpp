// How a generation ends, in every decoding mode, on the trained clover-tiny (sharp logits, so a
// denoising pass commits many positions at tau 0.95) and on the tiny synthetic model:
//   - a length limit only truncates the output: the answer with max_tokens N is the first N
//     tokens of the answer with a larger limit (CLOVER-SPEC 2.1: a limit does not shrink the
//     block), for greedy and seeded sampling, at tau 0.95 and at a threshold that commits one
//     position per pass;
//   - a generation that ends on an end token leaves the session holding prompt + output (the
//     end token included), so the next turn reuses all of it;
//   - the statistics of a session's last pass are its own, also when its passes were batched
//     with other sessions' (continuous batching).
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <latch>
#include <thread>

#include "clover/clover.h"
#include "tiny_engine.h"

namespace clover {
namespace {

std::string tiny_model_path() {
  const char* src = std::getenv("CLOVER_SOURCE_DIR");
  return std::string(src ? src : ".") + "/models/clover-tiny.gguf";
}

class StopAndLimitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 1024;
    engine_ = Engine::load(tiny_model_path(), o).release();
  }
  static void TearDownTestSuite() { delete engine_; }

  static std::vector<int32_t> chat_prompt(const std::string& question) {
    // As the Qwen3.5 template renders one user turn with thinking on.
    return engine_->tokenize("<|im_start|>user\n" + question + "<|im_end|>\n<|im_start|>assistant\n<think>\n", true);
  }
  struct Answer {
    std::vector<int32_t> tokens;
    Event last;
  };
  static Answer generate(Session& s, const std::vector<int32_t>& prompt, const GenerateOptions& go) {
    Answer a;
    a.last = s.generate(prompt, go, [&](const Event& e) {
      a.tokens.insert(a.tokens.end(), e.tokens.begin(), e.tokens.end());
      return true;
    });
    return a;
  }
  static inline Engine* engine_ = nullptr;
};

const char* mode_name(DecodeMode m) { return m == DecodeMode::AR ? "ar" : m == DecodeMode::Diffusion ? "diffusion" : "spec"; }

struct LimitCase {
  DecodeMode mode;
  float threshold;
  float temperature;
};

// For each case: the answer with -n N for several N against the first N tokens of -n 80.
void expect_limits_only_truncate(Engine& engine, const std::vector<int32_t>& prompt, std::initializer_list<LimitCase> cases) {
  for (const LimitCase& c : cases) {
    GenerateOptions go;
    go.mode = c.mode;
    go.threshold = c.threshold;
    go.ignore_eos = true;  // long answers, crossing block boundaries
    go.sampling.temperature = c.temperature;
    go.sampling.seed = 7;
    go.max_tokens = 80;
    go.block_size = 32;
    std::vector<int32_t> full;
    auto collect = [](std::vector<int32_t>& out) {
      return [&out](const Event& e) {
        out.insert(out.end(), e.tokens.begin(), e.tokens.end());
        return true;
      };
    };
    engine.new_session()->generate(prompt, go, collect(full));
    ASSERT_EQ(full.size(), 80u);
    for (int n : {1, 2, 31, 32, 33, 48, 63, 64, 65}) {
      go.max_tokens = n;
      auto s = engine.new_session();
      std::vector<int32_t> cut;
      const Event last = s->generate(prompt, go, collect(cut));
      const std::vector<int32_t> want(full.begin(), full.begin() + n);
      EXPECT_EQ(cut, want) << mode_name(c.mode) << " tau " << c.threshold << " temp " << c.temperature << ": -n " << n
                           << " is not a prefix of -n 80";
      EXPECT_EQ(last.finish, FinishReason::Length);
      EXPECT_EQ(s->n_past(), static_cast<int>(prompt.size()) + n) << mode_name(c.mode) << " -n " << n;
    }
  }
}

// clover-tiny: sharp logits, so a pass at tau 0.95 commits many positions (drone dispatch: a long
// JSON answer).
TEST_F(StopAndLimitTest, ALimitOnlyTruncatesTheAnswerInEveryMode) {
  const std::vector<int32_t> prompt = chat_prompt(
      "Dispatch orders: drone D-05 brings insulin to Clinic 1; D-12: inspect the west dock; drone D-31 searches the "
      "pine forest for a lost hiker; send D-07 to map the north field. Reply with the JSON list of orders.");
  expect_limits_only_truncate(*engine_, prompt,
                              {{DecodeMode::AR, -1.f, 0.f},
                               {DecodeMode::Spec, -1.f, 0.f},
                               {DecodeMode::Diffusion, 0.95f, 0.f},
                               {DecodeMode::Diffusion, 2.f, 0.f},  // tau > 1: one position per pass
                               {DecodeMode::Diffusion, 0.95f, 0.7f},
                               {DecodeMode::AR, -1.f, 0.7f}});
}

TEST_F(StopAndLimitTest, AnAnswerEndingOnAnEndTokenLeavesPromptPlusOutputInEveryMode) {
  const std::vector<int32_t> prompt = chat_prompt("What is the capital of Australia? One word.");
  for (DecodeMode mode : {DecodeMode::AR, DecodeMode::Diffusion, DecodeMode::Spec}) {
    GenerateOptions go;
    go.mode = mode;
    go.max_tokens = 300;
    auto s = engine_->new_session();
    const Answer a = generate(*s, prompt, go);
    ASSERT_FALSE(a.tokens.empty());
    EXPECT_EQ(a.last.finish, FinishReason::Stop) << mode_name(mode);
    EXPECT_TRUE(engine_->is_end_token(a.tokens.back())) << mode_name(mode) << ": the answer did not end on an end token";
    EXPECT_LT(a.tokens.size(), 300u) << mode_name(mode);
    EXPECT_EQ(a.last.stats.generated_tokens, static_cast<int>(a.tokens.size()));
    EXPECT_EQ(s->n_past(), static_cast<int>(prompt.size() + a.tokens.size()))
        << mode_name(mode) << ": the session must hold the prompt and every output token, the end token included";
    EXPECT_NE(engine_->detokenize(a.tokens).find("Canberra"), std::string::npos) << mode_name(mode);

    // The next turn extends prompt + answer: all of it is reused.
    std::vector<int32_t> next = prompt;
    next.insert(next.end(), a.tokens.begin(), a.tokens.end());
    const std::vector<int32_t> more = engine_->tokenize("\n<|im_start|>user\nAnd of Portugal?<|im_end|>\n<|im_start|>assistant\n", true);
    next.insert(next.end(), more.begin(), more.end());
    go.max_tokens = 4;
    const Answer b = generate(*s, next, go);
    EXPECT_EQ(b.last.stats.cached_tokens, static_cast<int>(prompt.size() + a.tokens.size())) << mode_name(mode);
    EXPECT_EQ(b.last.stats.prompt_tokens, static_cast<int>(more.size())) << mode_name(mode);
  }
}

// The tiny synthetic model: random logits; its per-pass statistics are exact numbers (top-k experts
// per token).
class SyntheticModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 256;
    tiny_ = new testing::TinyEngine(o);
  }
  static void TearDownTestSuite() { delete tiny_; }
  static inline testing::TinyEngine* tiny_ = nullptr;
};

// The tiny synthetic model: random logits, so which position of a block is the most confident is
// anywhere in the block; a limit that decided only the positions it outputs would choose others.
TEST_F(SyntheticModelTest, ALimitOnlyTruncatesTheAnswerOnARandomModelToo) {
  const std::vector<int32_t> prompt = tiny_->engine->tokenize("A prompt for the random model.", false);
  expect_limits_only_truncate(*tiny_->engine, prompt,
                              {{DecodeMode::Diffusion, 2.f, 0.f}, {DecodeMode::Diffusion, 0.5f, 0.f},
                               {DecodeMode::Diffusion, 2.f, 0.8f}, {DecodeMode::Spec, -1.f, 0.f}});
}

TEST_F(SyntheticModelTest, LastPassIsTheSessionsOwnUnderBatching) {
  Engine& engine = *tiny_->engine;
  const ModelInfo& info = engine.info();
  constexpr int kSessions = 4;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < kSessions; ++i) sessions.push_back(engine.new_session());
  const BatchingStats before = engine.batching_stats();
  std::vector<PassStats> last(kSessions);
  std::vector<std::thread> threads;
  std::latch start(kSessions);  // all generations begin together, so their passes meet in batches
  for (int i = 0; i < kSessions; ++i)
    threads.emplace_back([&, i] {
      GenerateOptions go;
      go.max_tokens = 24;
      go.ignore_eos = true;
      const std::vector<int32_t> prompt = engine.tokenize("Session " + std::to_string(i) + " says hello.", false);
      start.arrive_and_wait();
      sessions[i]->generate(prompt, go, [](const Event&) { return true; });
      last[i] = sessions[i]->last_pass();
    });
  for (auto& t : threads) t.join();
  ASSERT_GT(engine.batching_stats().max_sequences, 1) << "the generations were never batched: the test shows nothing";
  ASSERT_GT(engine.batching_stats().passes, before.passes);
  for (int i = 0; i < kSessions; ++i) {
    // An AR generation ends with the commit of its last token: one token, k experts per layer.
    EXPECT_EQ(last[i].tokens, 1) << "session " << i << " reports a pass that is not its own";
    EXPECT_EQ(last[i].expert_rows, static_cast<int64_t>(info.n_expert_used) * info.n_layer) << "session " << i;
    EXPECT_EQ(last[i].distinct_experts, static_cast<int64_t>(info.n_expert_used) * info.n_layer) << "session " << i;
  }

  // A denoising pass alone reports its block's tokens.
  auto s = engine.new_session();
  s->eval(engine.tokenize("A prompt.", false), false);
  std::vector<int32_t> block(8, info.mask_token);
  block[0] = 1;
  s->denoise(block);
  EXPECT_EQ(s->last_pass().tokens, 8);
  EXPECT_EQ(s->last_pass().expert_rows, 8 * static_cast<int64_t>(info.n_expert_used) * info.n_layer);
}

}  // namespace
}  // namespace clover
