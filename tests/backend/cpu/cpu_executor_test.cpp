// CPU executor properties that need no oracle: batch invariance (a token's logits do not depend on
// how the sequence was split into passes), state reset, and errors for bad input.
#include <gtest/gtest.h>

#include <random>

#include "cpu_runner.h"
#include "../../model/model_test_util.h"

namespace clover {
namespace {

using testing::TempDir;
using testing::random_tokens;

class CpuExecutorByType : public ::testing::TestWithParam<DType> {};

TEST_P(CpuExecutorByType, SplittingTheSequenceDoesNotChangeLogits) {
  TempDir d;
  synth::SynthConfig c = synth::preset("tiny");
  c.type = GetParam();
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", c));
  const int V = m->hp().n_vocab;
  const std::vector<int32_t> toks = random_tokens(40, 500, 3);
  for (int threads : {1, 2}) {
    testing::CpuRunner whole(*m, threads, 64);
    testing::CpuSequence s1(m->hp(), 64);
    std::vector<float> all(toks.size() * V);
    whole.causal(s1, toks, backend::LogitRows::All, all.data());

    // Token by token, and in uneven chunks through a small max batch.
    testing::CpuRunner small(*m, threads, 5);
    testing::CpuSequence s2(m->hp(), 64);
    std::vector<float> one(V);
    size_t pos = 0;
    for (size_t n : {1, 3, 7, 1, 11, 17}) {
      std::vector<float> part(n * V);
      small.causal(s2, std::span<const int32_t>(toks).subspan(pos, n), backend::LogitRows::All, part.data());
      for (size_t i = 0; i < n * V; ++i) ASSERT_EQ(part[i], all[pos * V + i]) << "threads " << threads << " position " << pos + i / V;
      pos += n;
    }
    ASSERT_EQ(pos, toks.size());
    EXPECT_EQ(s2.n_past(), 40);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuExecutorByType, ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CpuExecutor, ResetGivesTheSameLogitsAgain) {
  TempDir d;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", synth::preset("tiny")));
  testing::CpuRunner f(*m, 2);
  testing::CpuSequence s(m->hp(), 32);
  const auto toks = random_tokens(20, 500, 9);
  std::vector<float> a(m->hp().n_vocab), b(m->hp().n_vocab);
  f.causal(s, toks, backend::LogitRows::Last, a.data());
  s.reset();
  f.causal(s, toks, backend::LogitRows::Last, b.data());
  EXPECT_EQ(a, b);
}

TEST(CpuExecutor, RejectsBadInputWithClearErrors) {
  TempDir d;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", synth::preset("tiny")));
  testing::CpuRunner f(*m, 1);
  testing::CpuSequence s(m->hp(), 8);
  std::vector<float> logits(m->hp().n_vocab);
  const std::vector<int32_t> bad = {1, 2, 512};
  try {
    f.causal(s, bad, backend::LogitRows::Last, logits.data());
    FAIL() << "no error for token 512";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("token id 512 is outside the vocabulary"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.n_past(), 0) << "a rejected call must not change the state";
  const auto nine = random_tokens(9, 500, 1);
  try {
    f.causal(s, nine, backend::LogitRows::Last, logits.data());
    FAIL() << "no error for 9 tokens in a context of 8";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("0 cached + 9 new tokens exceed the context of 8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace clover
