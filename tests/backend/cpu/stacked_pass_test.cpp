// A stacked pass (several sequences in one pass of the CPU executor) gives every sequence exactly
// the logits, the state and the pass statistics it gets when run alone: causal passes of any length, decode steps, denoising blocks (which
// leave the state unchanged), mixed in one pass, for several weight types and thread counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cpu_runner.h"
#include "../../model/model_test_util.h"

namespace clover {
namespace {

using testing::TempDir;
using backend::LogitRows;
using backend::PassKind;
using backend::Pass;
using testing::random_tokens;

struct Step {
  std::vector<int32_t> tokens;
  PassKind kind = PassKind::Causal;
  LogitRows rows = LogitRows::Last;
};

size_t n_logit_rows(const Step& s) {
  if (s.kind == PassKind::Denoise || s.rows == LogitRows::All) return s.tokens.size();
  return s.rows == LogitRows::Last ? 1 : 0;
}

class StackedPassByType : public ::testing::TestWithParam<DType> {};

TEST_P(StackedPassByType, EverySequenceGetsTheLogitsAndStateItGetsAlone) {
  TempDir d;
  synth::SynthConfig c = synth::preset("tiny");
  c.type = GetParam();
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", c));
  const model::HParams& hp = m->hp();
  ASSERT_TRUE(hp.has_reverse_path);
  const int V = hp.n_vocab;
  auto mask_block = [&](int32_t first, int B) {
    std::vector<int32_t> b(B, hp.mask_token);
    b[0] = first;
    b[3] = 7;  // a decided position inside the block
    return b;
  };
  // Three rounds of passes over four sequences; each round is one stacked pass.
  const std::vector<std::vector<Step>> rounds = {
      {{random_tokens(7, 500, 1), PassKind::Causal, LogitRows::All},
       {random_tokens(5, 500, 2), PassKind::Causal, LogitRows::Last},
       {random_tokens(3, 500, 3), PassKind::Causal, LogitRows::None},
       {random_tokens(11, 500, 4), PassKind::Causal, LogitRows::Last}},
      {{{42}, PassKind::Causal, LogitRows::Last},
       {mask_block(5, 8), PassKind::Denoise, LogitRows::All},
       {random_tokens(4, 500, 5), PassKind::Causal, LogitRows::All},
       {{9}, PassKind::Causal, LogitRows::Last}},
      {{{43}, PassKind::Causal, LogitRows::Last},
       {random_tokens(8, 500, 6), PassKind::Causal, LogitRows::All},
       {mask_block(11, 6), PassKind::Denoise, LogitRows::All},
       {{10}, PassKind::Causal, LogitRows::Last}},
  };
  const size_t n_seq = rounds[0].size();
  for (int threads : {1, 2}) {
    testing::CpuRunner alone(*m, threads, 64), together(*m, threads, 64);
    std::vector<std::unique_ptr<testing::CpuSequence>> sa, sb;
    for (size_t i = 0; i < n_seq; ++i) {
      sa.push_back(std::make_unique<testing::CpuSequence>(hp, 128));
      sb.push_back(std::make_unique<testing::CpuSequence>(hp, 128));
    }
    for (size_t r = 0; r < rounds.size(); ++r) {
      std::vector<std::vector<float>> la(n_seq), lb(n_seq);
      std::vector<Pass> passes;
      std::vector<backend::PassStats> alone_stats(n_seq);
      for (size_t i = 0; i < n_seq; ++i) {
        const Step& st = rounds[r][i];
        la[i].assign(n_logit_rows(st) * V, 1.f);
        lb[i].assign(n_logit_rows(st) * V, -1.f);
        if (st.kind == PassKind::Denoise) {
          alone_stats[i] = alone.denoise(*sa[i], st.tokens, la[i].data());
          passes.push_back(Pass::denoise(*sb[i], st.tokens, {}, lb[i].data(), true));
        } else {
          alone_stats[i] = alone.causal(*sa[i], st.tokens, st.rows, la[i].data());
          passes.push_back(Pass::causal(*sb[i], st.tokens, st.rows, lb[i].data()));
        }
      }
      together.multi(passes);
      for (size_t i = 0; i < n_seq; ++i) {
        ASSERT_EQ(sa[i]->n_past(), sb[i]->n_past()) << "round " << r << " sequence " << i;
        EXPECT_EQ(passes[i].stats.tokens, alone_stats[i].tokens) << "round " << r << " sequence " << i;
        EXPECT_EQ(passes[i].stats.expert_rows, alone_stats[i].expert_rows) << "round " << r << " sequence " << i;
        EXPECT_EQ(passes[i].stats.distinct_experts, alone_stats[i].distinct_experts) << "round " << r << " sequence " << i;
        for (size_t j = 0; j < la[i].size(); ++j)
          ASSERT_EQ(la[i][j], lb[i][j]) << "threads " << threads << " round " << r << " sequence " << i << " row " << j / V;
      }
    }
    // The states are the same: bitwise, and the next token's logits agree.
    for (size_t i = 0; i < n_seq; ++i) {
      ASSERT_EQ(sa[i]->committed_state(), sb[i]->committed_state()) << "sequence " << i;
      std::vector<float> a(V), b(V);
      const int32_t t = 77;
      alone.causal(*sa[i], std::span<const int32_t>(&t, 1), LogitRows::Last, a.data());
      alone.causal(*sb[i], std::span<const int32_t>(&t, 1), LogitRows::Last, b.data());
      ASSERT_EQ(a, b) << "sequence " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, StackedPassByType, ::testing::Values(DType::F32, DType::BF16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(StackedPass, RejectsOversizedAndDuplicatePasses) {
  TempDir d;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", synth::preset("tiny")));
  testing::CpuRunner f(*m, 1, 8);
  testing::CpuSequence a(m->hp(), 64), b(m->hp(), 64);
  std::vector<int32_t> five = random_tokens(5, 500, 1), four = random_tokens(4, 500, 2);
  std::vector<float> la(m->hp().n_vocab), lb(m->hp().n_vocab);
  std::vector<Pass> too_big{Pass::causal(a, five, LogitRows::Last, la.data()), Pass::causal(b, four, LogitRows::Last, lb.data())};
  EXPECT_THROW(f.multi(too_big), model::ModelError);
  std::vector<Pass> twice{Pass::causal(a, four, LogitRows::Last, la.data()), Pass::causal(a, four, LogitRows::Last, lb.data())};
  EXPECT_THROW(f.multi(twice), model::ModelError);
  const std::vector<int32_t> bad{1, 1 << 30};
  std::vector<Pass> out_of_vocab{Pass::causal(a, bad, LogitRows::Last, la.data()), Pass::causal(b, four, LogitRows::Last, lb.data())};
  EXPECT_THROW(f.multi(out_of_vocab), model::ModelError);
  EXPECT_EQ(a.n_past(), 0);
  EXPECT_EQ(b.n_past(), 0);
}

// A denoising pass asked for some block positions writes those rows bit for bit as the full pass
// does, alone and inside a stacked pass (which also leaves the other rows alone).
TEST(DenoiseRows, SelectedRowsEqualTheFullPassAndOthersAreUntouched) {
  TempDir d;
  synth::SynthConfig c = synth::preset("tiny");
  c.type = DType::Q8_0;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", c));
  const model::HParams& hp = m->hp();
  const size_t V = static_cast<size_t>(hp.n_vocab);
  testing::CpuRunner f(*m, 2, 64);
  testing::CpuSequence a(hp, 128), b(hp, 128);
  const std::vector<int32_t> prompt = random_tokens(9, 500, 8);
  f.causal(a, prompt, LogitRows::None, nullptr);
  f.causal(b, prompt, LogitRows::None, nullptr);
  std::vector<int32_t> block(8, hp.mask_token);
  block[0] = 12, block[2] = 30;
  const std::vector<int32_t> rows{0, 3, 4, 6};
  std::vector<float> full(8 * V), sel(8 * V, -7.0f), in_multi(8 * V, -7.0f), other(V);
  f.denoise(a, block, full.data());
  f.denoise(a, block, sel.data(), true, rows);
  const std::vector<int32_t> step{5};
  std::vector<Pass> passes{Pass::causal(a, step, LogitRows::Last, other.data()), Pass::denoise(b, block, rows, in_multi.data(), true)};
  f.multi(passes);
  for (int r = 0; r < 8; ++r) {
    const bool want = std::find(rows.begin(), rows.end(), r) != rows.end();
    for (size_t v = 0; v < V; ++v) {
      if (want) {
        ASSERT_EQ(sel[r * V + v], full[r * V + v]) << "alone: row " << r << " token " << v;
      }
      ASSERT_EQ(in_multi[r * V + v], want ? full[r * V + v] : -7.0f) << "multi: row " << r << " token " << v;
    }
  }
  const std::vector<int32_t> descending{3, 1}, beyond{2, 8};
  EXPECT_THROW(f.denoise(b, block, sel.data(), true, descending), model::ModelError);
  EXPECT_THROW(f.denoise(b, block, sel.data(), true, beyond), model::ModelError);
}

}  // namespace
}  // namespace clover
