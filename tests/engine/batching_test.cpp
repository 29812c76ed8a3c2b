// Continuous batching and recurrent-state snapshots through the engine API: generations on
// several sessions driven from several threads at once share forward passes and produce exactly
// what each produces alone (every mode, greedy and seeded sampling); a prompt that diverges from
// a session's history after an earlier prompt reuses that prompt's prefix through its snapshot.
#include <gtest/gtest.h>

#include <thread>

#include "clover/clover.h"
#include "tiny_engine.h"

namespace clover {
namespace {

class BatchingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 512;
    o.max_batch = 64;  // small, so that long prompts are chunked and rounds overflow
    tiny_ = new testing::TinyEngine(o);
    engine_ = tiny_->engine.get();
  }
  static void TearDownTestSuite() { delete tiny_; }
  static inline testing::TinyEngine* tiny_ = nullptr;
  static inline Engine* engine_ = nullptr;
};

struct Job {
  std::vector<int32_t> prompt;
  GenerateOptions opts;
};

std::vector<int32_t> run(Session& s, const Job& j, GenerateStats* stats = nullptr) {
  std::vector<int32_t> out;
  Event last = s.generate(j.prompt, j.opts, [&](const Event& e) {
    out.insert(out.end(), e.tokens.begin(), e.tokens.end());
    return true;
  });
  if (stats) *stats = last.stats;
  return out;
}

TEST_F(BatchingTest, ConcurrentGenerationsEqualEachRunAlone) {
  std::vector<Job> jobs;
  const DecodeMode modes[] = {DecodeMode::AR, DecodeMode::Diffusion, DecodeMode::Spec};
  for (int i = 0; i < 5; ++i) {
    Job j;
    std::string text = "Prompt number " + std::to_string(i) + ": ";
    for (int r = 0; r < i * 8; ++r) text += "more words ";  // long ones take several chunks of 64
    j.prompt = engine_->tokenize(text, false);
    j.opts.max_tokens = 8 + 2 * i;
    j.opts.ignore_eos = true;
    j.opts.mode = modes[i % 3];
    j.opts.block_size = 8;
    j.opts.threshold = 0.5f;
    if (i == 3 || i == 4) {  // seeded sampling (ar, diffusion)
      j.opts.sampling.temperature = 0.8f;
      j.opts.sampling.seed = 100 + i;
    }
    jobs.push_back(std::move(j));
  }
  std::vector<std::vector<int32_t>> alone;
  for (const Job& j : jobs) alone.push_back(run(*engine_->new_session(), j));

  const BatchingStats before = engine_->batching_stats();
  std::vector<std::unique_ptr<Session>> sessions;
  for (size_t i = 0; i < jobs.size(); ++i) sessions.push_back(engine_->new_session());
  std::vector<std::vector<int32_t>> together(jobs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i) threads.emplace_back([&, i] { together[i] = run(*sessions[i], jobs[i]); });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "job " << i;

  const BatchingStats after = engine_->batching_stats();
  EXPECT_GT(after.max_sequences, 1) << "no pass held more than one sequence";
  EXPECT_GT(after.sequences - before.sequences, after.passes - before.passes) << "passes were not shared";
}

TEST_F(BatchingTest, APromptDivergingAfterAnEarlierPromptReusesItsSnapshot) {
  const std::vector<int32_t> p1 = engine_->tokenize("First turn: the user asks something.", false);
  Job j1{p1, {}};
  j1.opts.max_tokens = 10;
  j1.opts.ignore_eos = true;
  auto s = engine_->new_session();
  GenerateStats st;
  const std::vector<int32_t> out1 = run(*s, j1, &st);
  EXPECT_EQ(st.cached_tokens, 0);

  // Turn 2 keeps turn 1's prompt but not its output (a template that re-renders the answer).
  std::vector<int32_t> p2 = p1;
  for (int32_t t : engine_->tokenize(" A re-rendered answer, then the next question.", false)) p2.push_back(t);
  ASSERT_NE(std::vector<int32_t>(p2.begin() + p1.size(), p2.begin() + p1.size() + 1), std::vector<int32_t>(out1.begin(), out1.begin() + 1));
  EXPECT_EQ(s->reusable_prefix(p2), static_cast<int>(p1.size()));
  Job j2{p2, j1.opts};
  const std::vector<int32_t> out2 = run(*s, j2, &st);
  EXPECT_EQ(st.cached_tokens, static_cast<int>(p1.size()));
  EXPECT_EQ(st.prompt_tokens, static_cast<int>(p2.size() - p1.size()));
  EXPECT_EQ(out2, run(*engine_->new_session(), j2)) << "restoring the snapshot changed the output";

  // Turn 3 extends turn 2's whole history: everything is reused, no snapshot needed.
  std::vector<int32_t> p3 = p2;
  p3.insert(p3.end(), out2.begin(), out2.end());
  p3.push_back(42);
  Job j3{p3, j1.opts};
  const std::vector<int32_t> out3 = run(*s, j3, &st);
  EXPECT_EQ(st.cached_tokens, static_cast<int>(p3.size() - 1));
  EXPECT_EQ(out3, run(*engine_->new_session(), j3));

  // Back to turn 2's prompt with another continuation: its snapshot is still there (two are kept:
  // the ends of prompts 2 and 3).
  std::vector<int32_t> p4 = p2;
  p4.push_back(7);
  EXPECT_EQ(s->reusable_prefix(p4), static_cast<int>(p2.size()));
  // A prompt diverging inside turn 1's prompt has no usable snapshot.
  std::vector<int32_t> p5(p1.begin(), p1.begin() + 3);
  p5.push_back(9);
  EXPECT_EQ(s->reusable_prefix(p5), 0);
  Job j5{p5, j1.opts};
  j5.opts.snapshot_at = {2, 3};  // inside the prompt: where the next one will diverge
  run(*s, j5, &st);
  EXPECT_EQ(st.cached_tokens, 0);
  std::vector<int32_t> p6(p5.begin(), p5.begin() + 3);
  p6.push_back(11);
  p6.push_back(12);
  Job j6{p6, j1.opts};
  const std::vector<int32_t> out6 = run(*s, j6, &st);
  EXPECT_EQ(st.cached_tokens, 3);
  EXPECT_EQ(st.prompt_tokens, 2);
  EXPECT_EQ(out6, run(*engine_->new_session(), j6));
}

}  // namespace
}  // namespace clover
