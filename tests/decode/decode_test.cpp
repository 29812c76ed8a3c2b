// The decoding modes against their defining properties (CLOVER-SPEC section 2):
//   - a commit pass leaves exactly the state AR decoding of the same tokens leaves (bitwise);
//   - a denoising pass leaves the state untouched;
//   - guess-then-verify with greedy sampling outputs exactly the AR greedy tokens, and after
//     rejected drafts its state equals the AR state at the same point (bitwise);
//   - diffusion with tau above 1 commits one position per pass, with tau = 0 one pass per block.
#include <cstring>
#include <gtest/gtest.h>

#include <random>

#include "decode/decoders.h"
#include "../backend/cpu/cpu_runner.h"
#include "../model/model_test_util.h"

namespace clover {
namespace {

using testing::TempDir;

// Token ids below 500, reproducible from `seed`.
std::vector<int32_t> random_tokens(int n, uint32_t seed) { return testing::random_tokens(n, 500, seed); }

void expect_same_state(const backend::Sequence& a, const backend::Sequence& b) {
  ASSERT_EQ(a.n_past(), b.n_past());
  // The caches' bytes at the committed positions (whatever their type) and the GDN states.
  ASSERT_TRUE(a.committed_state() == b.committed_state()) << "the committed states differ";
}

class DecodeTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    synth::SynthConfig c = synth::preset("tiny");
    c.type = GetParam();
    model_ = model::Model::load(testing::write_synth(dir_, "m.gguf", c));
  }
  const model::HParams& hp() const { return model_->hp(); }

  // Runs a decoder from a prompt and returns the emitted tokens (and the state).
  std::vector<int32_t> run(const std::vector<int32_t>& prompt, int n, const std::string& mode, int block, double tau,
                           testing::CpuSequence& st, decode::Stats& stats, int stop_at = -1) {
    testing::CpuRunner f(*model_, 2, 64);
    sampling::SamplingParams sp;
    sp.temperature = 0;
    sampling::Sampler sampler(sp, hp().n_vocab);
    std::vector<float> logits(hp().n_vocab);
    f.causal(st, prompt, backend::LogitRows::Last, logits.data());
    std::vector<int32_t> committed = prompt, out;
    decode::Context ctx{f.pass_fn(), st, sampler, committed, hp().n_vocab};
    decode::Options o;
    o.max_tokens = n;
    o.block_size = block;
    o.threshold = tau;
    o.mask_token = hp().mask_token;
    const int32_t pending = sampler.sample(logits.data(), committed).token;
    auto emit = [&](int32_t t) {  // stop_at: as an end token would, after that many tokens
      out.push_back(t);
      return static_cast<int>(out.size()) != stop_at;
    };
    if (mode == "ar") decode::decode_ar(ctx, pending, o, emit, stats);
    if (mode == "spec") decode::decode_spec(ctx, pending, o, emit, stats);
    if (mode == "diffusion") decode::decode_diffusion(ctx, pending, o, emit, stats);
    EXPECT_EQ(committed.size(), prompt.size() + out.size()) << mode << ": the committed list must equal prompt + output";
    EXPECT_EQ(st.n_past(), static_cast<int>(committed.size())) << mode << ": the state must hold prompt + output";
    return out;
  }

  TempDir dir_;
  std::unique_ptr<model::Model> model_;
};

TEST_P(DecodeTest, SpecGreedyEqualsArGreedyAndLeavesTheSameState) {
  int cases = 0;
  for (int block : {2, 5, 16, 32})
    for (int prompt_len : {1, 9, 40})
      for (int n : {1, 7, 45}) {
        const auto prompt = random_tokens(prompt_len, 100 + prompt_len + block);
        testing::CpuSequence sa(hp(), 200), ss(hp(), 200);
        decode::Stats st_a, st_s;
        const auto ar = run(prompt, n, "ar", block, 0.95, sa, st_a);
        const auto spec = run(prompt, n, "spec", block, 0.95, ss, st_s);
        ASSERT_EQ(ar, spec) << "block " << block << ", prompt " << prompt_len << ", n " << n;
        expect_same_state(sa, ss);
        ++cases;
      }
  EXPECT_EQ(cases, 36);
}

TEST_P(DecodeTest, CommitPassStateEqualsTokenByTokenState) {
  testing::CpuRunner f(*model_, 2, 64);
  const auto prefix = random_tokens(13, 5), block = random_tokens(32, 6);
  testing::CpuSequence a(hp(), 64), b(hp(), 64);
  std::vector<float> la(hp().n_vocab), lb(hp().n_vocab);
  f.causal(a, prefix, backend::LogitRows::Last, la.data());
  f.causal(b, prefix, backend::LogitRows::Last, lb.data());
  f.causal(a, block, backend::LogitRows::Last, la.data());  // one commit pass
  for (int32_t t : block) f.causal(b, std::span<const int32_t>(&t, 1), backend::LogitRows::Last, lb.data());
  expect_same_state(a, b);
  EXPECT_EQ(la, lb);
}

TEST_P(DecodeTest, DenoisingPassLeavesTheStateUnchanged) {
  testing::CpuRunner f(*model_, 2, 64);
  const auto prefix = random_tokens(20, 7);
  testing::CpuSequence a(hp(), 64), b(hp(), 64);
  std::vector<float> l(32 * hp().n_vocab);
  f.causal(a, prefix, backend::LogitRows::Last, l.data());
  f.causal(b, prefix, backend::LogitRows::Last, l.data());
  std::vector<int32_t> block(32, hp().mask_token);
  block[0] = 3;
  block[7] = 11;
  f.denoise(a, block, l.data());
  std::vector<float> first(l);
  f.denoise(a, block, l.data());
  EXPECT_EQ(first, l) << "two identical denoising passes must agree";
  expect_same_state(a, b);
}

TEST_P(DecodeTest, ThresholdAboveOneCommitsOnePositionPerPass) {
  testing::CpuSequence st(hp(), 200);
  decode::Stats s;
  const auto out = run(random_tokens(10, 1), 70, "diffusion", 32, 1.5, st, s);
  ASSERT_EQ(out.size(), 70u);
  EXPECT_EQ(s.denoised_tokens, s.denoise_passes);
  for (int32_t t : out) {
    EXPECT_NE(t, hp().mask_token);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, hp().n_vocab);
  }
  // 70 tokens = 2 full blocks (31 denoised each) + 6 positions of a third: at least 5 passes,
  // as many as it takes until its first 6 positions are decided (a limit does not shrink the
  // block, so a pass may decide a later position first).
  EXPECT_GE(s.denoise_passes, 31 + 31 + 5);
  EXPECT_LE(s.denoise_passes, 31 + 31 + 31);
  // The same 70 tokens start the answer with a larger limit.
  testing::CpuSequence st2(hp(), 200);
  decode::Stats s2;
  const auto longer = run(random_tokens(10, 1), 96, "diffusion", 32, 1.5, st2, s2);
  EXPECT_EQ(std::vector<int32_t>(longer.begin(), longer.begin() + 70), out);
  EXPECT_EQ(s2.denoise_passes, 3 * 31);
}

// A decoder stopped by its emit callback (an end token, a stop string, a client that left) leaves
// the sequence holding prompt + output, the last token included, wherever in a block it stops.
TEST_P(DecodeTest, StoppingLeavesPromptPlusOutputInEveryMode) {
  const auto prompt = random_tokens(12, 4);
  for (const std::string mode : {"ar", "diffusion", "spec"})
    for (int stop_at : {1, 8, 9, 17}) {  // the first token; the end, the start, inside a block
      testing::CpuSequence st(hp(), 200);
      decode::Stats s;
      const auto out = run(prompt, 64, mode, 8, 0.5, st, s, stop_at);  // run() checks n_past
      EXPECT_EQ(static_cast<int>(out.size()), stop_at) << mode;
      // The state is the AR state of the same tokens (bitwise).
      testing::CpuRunner f(*model_, 2, 64);
      testing::CpuSequence ref(hp(), 200);
      std::vector<int32_t> all = prompt;
      all.insert(all.end(), out.begin(), out.end());
      for (int32_t t : all) f.causal(ref, std::span<const int32_t>(&t, 1), backend::LogitRows::None, nullptr);
      if (mode == "ar") expect_same_state(st, ref);
      EXPECT_EQ(st.n_past(), ref.n_past()) << mode << " stopped after " << stop_at;
    }
}

TEST_P(DecodeTest, ThresholdZeroFinishesEveryBlockInOnePass) {
  testing::CpuSequence st(hp(), 200);
  decode::Stats s;
  const auto out = run(random_tokens(10, 2), 64, "diffusion", 32, 0.0, st, s);
  ASSERT_EQ(out.size(), 64u);
  EXPECT_EQ(s.denoise_passes, 2);
  EXPECT_EQ(s.blocks, 2);
}

TEST_P(DecodeTest, BlockOfTwoMakesOneMaskedPositionPerBlock) {
  // With B = 2 each block has one masked position, predicted from the pending token: exactly an
  // AR step only if the denoising pass equals the causal pass there. It does not (the pass sees
  // the mask token at position 1 through bidirectional attention and the reverse path), so only
  // validity is checked here; the equality that does hold is spec == AR above.
  testing::CpuSequence st(hp(), 200);
  decode::Stats s;
  const auto out = run(random_tokens(10, 3), 20, "diffusion", 2, 0.95, st, s);
  EXPECT_EQ(out.size(), 20u);
  EXPECT_EQ(s.blocks, 10);
}

INSTANTIATE_TEST_SUITE_P(Types, DecodeTest, ::testing::Values(DType::F32, DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace clover
