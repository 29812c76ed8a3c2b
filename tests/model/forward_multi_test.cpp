// Forward::multi (several sequences in one pass) gives every sequence exactly the logits and the
// state it gets when run alone: causal passes of any length, decode steps, denoising blocks (which
// leave the state unchanged), mixed in one pass, for several weight types and thread counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "model/forward.h"
#include "model_test_util.h"

namespace clover {
namespace {

using testing::TempDir;
using model::LogitRows;
using model::PassKind;
using model::SeqPass;
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

class ForwardMultiByType : public ::testing::TestWithParam<DType> {};

TEST_P(ForwardMultiByType, EverySequenceGetsTheLogitsAndStateItGetsAlone) {
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
  // Three rounds of passes over four sequences; each round is one multi() call.
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
    ThreadPool pool(threads);
    model::Forward alone(*m, pool, 64), together(*m, pool, 64);
    std::vector<std::unique_ptr<model::SequenceState>> sa, sb;
    for (size_t i = 0; i < n_seq; ++i) {
      sa.push_back(std::make_unique<model::SequenceState>(hp, 128));
      sb.push_back(std::make_unique<model::SequenceState>(hp, 128));
    }
    for (size_t r = 0; r < rounds.size(); ++r) {
      std::vector<std::vector<float>> la(n_seq), lb(n_seq);
      std::vector<SeqPass> passes;
      for (size_t i = 0; i < n_seq; ++i) {
        const Step& st = rounds[r][i];
        la[i].assign(n_logit_rows(st) * V, 1.f);
        lb[i].assign(n_logit_rows(st) * V, -1.f);
        if (st.kind == PassKind::Denoise)
          alone.denoise(*sa[i], st.tokens, la[i].data());
        else
          alone.causal(*sa[i], st.tokens, st.rows, la[i].data());
        passes.push_back(SeqPass{sb[i].get(), st.tokens, st.kind, st.rows, lb[i].data(), true});
      }
      together.multi(passes);
      for (size_t i = 0; i < n_seq; ++i) {
        ASSERT_EQ(sa[i]->n_past, sb[i]->n_past) << "round " << r << " sequence " << i;
        for (size_t j = 0; j < la[i].size(); ++j)
          ASSERT_EQ(la[i][j], lb[i][j]) << "threads " << threads << " round " << r << " sequence " << i << " row " << j / V;
      }
    }
    // The states are the same: the next token's logits agree (KV cache and GDN state).
    for (size_t i = 0; i < n_seq; ++i) {
      std::vector<float> a(V), b(V);
      const int32_t t = 77;
      alone.causal(*sa[i], std::span<const int32_t>(&t, 1), LogitRows::Last, a.data());
      alone.causal(*sb[i], std::span<const int32_t>(&t, 1), LogitRows::Last, b.data());
      ASSERT_EQ(a, b) << "sequence " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ForwardMultiByType, ::testing::Values(DType::F32, DType::BF16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(ForwardMulti, RejectsOversizedAndDuplicatePasses) {
  TempDir d;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", synth::preset("tiny")));
  ThreadPool pool(1);
  model::Forward f(*m, pool, 8);
  model::SequenceState a(m->hp(), 64), b(m->hp(), 64);
  std::vector<int32_t> five = random_tokens(5, 500, 1), four = random_tokens(4, 500, 2);
  std::vector<float> la(m->hp().n_vocab), lb(m->hp().n_vocab);
  std::vector<SeqPass> too_big{{&a, five, PassKind::Causal, LogitRows::Last, la.data()},
                               {&b, four, PassKind::Causal, LogitRows::Last, lb.data()}};
  EXPECT_THROW(f.multi(too_big), model::ModelError);
  std::vector<SeqPass> twice{{&a, four, PassKind::Causal, LogitRows::Last, la.data()},
                             {&a, four, PassKind::Causal, LogitRows::Last, lb.data()}};
  EXPECT_THROW(f.multi(twice), model::ModelError);
  const std::vector<int32_t> bad{1, 1 << 30};
  std::vector<SeqPass> out_of_vocab{{&a, bad, PassKind::Causal, LogitRows::Last, la.data()}};
  EXPECT_THROW(f.multi(out_of_vocab), model::ModelError);
  EXPECT_EQ(a.n_past, 0);
  EXPECT_EQ(b.n_past, 0);
}

// A denoising pass asked for some block positions writes those rows bit for bit as the full pass
// does, alone and inside a multi-sequence pass (which also leaves the other rows alone).
TEST(ForwardDenoiseRows, SelectedRowsEqualTheFullPassAndOthersAreUntouched) {
  TempDir d;
  synth::SynthConfig c = synth::preset("tiny");
  c.type = DType::Q8_0;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", c));
  const model::HParams& hp = m->hp();
  const size_t V = static_cast<size_t>(hp.n_vocab);
  ThreadPool pool(2);
  model::Forward f(*m, pool, 64);
  model::SequenceState a(hp, 128), b(hp, 128);
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
  std::vector<SeqPass> passes{{&a, step, PassKind::Causal, LogitRows::Last, other.data()},
                              {&b, block, PassKind::Denoise, LogitRows::All, in_multi.data(), true, rows}};
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
