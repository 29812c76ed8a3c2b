// The CPU pass profile (CLOVER_CPU_PROFILE, backend/cpu/pass_profile.h): a decode step of the tiny
// model counts each part once per layer of its kind, the bytes each part reads are the weights
// (and cache) the step needs, counted once, a stacked pass counts its projections once, and the
// logits are bitwise those with the profile off.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/pass_profile.h"
#include "../../model/model_test_util.h"

namespace clover {
namespace {

using backend::LogitRows;
using backend::Pass;
using backend::cpu::PassPart;
using backend::cpu::PassProfile;
using backend::cpu::mat_bytes;

// A 10-token prompt, then one decode step whose logits are returned (the profile, if on, cleared
// before the step).
std::vector<float> prompt_then_step(const model::Model& m, backend::cpu::CpuExecutor& cpu) {
  const int V = m.hp().n_vocab;
  auto seq = cpu.new_sequence(64, {});
  const std::vector<int32_t> prompt = testing::random_tokens(10, V, 4);
  Pass p = Pass::causal(*seq, prompt, LogitRows::None, nullptr);
  cpu.run(p);
  if (PassProfile* prof = PassProfile::active()) prof->clear();
  std::vector<float> logits(V);
  const std::vector<int32_t> one = {prompt[2]};
  Pass s = Pass::causal(*seq, one, LogitRows::Last, logits.data());
  cpu.run(s);
  return logits;
}

TEST(PassProfile, ADecodeStepCountsEachPartAndTheBytesItReads) {
  testing::TempDir d;
  synth::SynthConfig c = synth::preset("tiny");
  c.type = DType::Q4_0;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", c));
  const model::HParams& hp = m->hp();
  const model::ModelWeights& w = m->weights();

  PassProfile::disable();
  std::vector<float> off;
  {
    backend::cpu::CpuExecutor cpu(*m, {2, 64});
    off = prompt_then_step(*m, cpu);
  }
  PassProfile& prof = PassProfile::enable();
  backend::cpu::CpuExecutor cpu(*m, {2, 64});
  const std::vector<float> on = prompt_then_step(*m, cpu);
  EXPECT_EQ(on, off) << "the profile changed the logits";

  EXPECT_EQ(prof.passes(), 1u);
  EXPECT_EQ(prof.tokens(), 1u);
  const uint64_t L = hp.n_layer, nG = hp.n_gdn_layers(), nA = hp.n_attn_layers();
  ASSERT_GT(nG, 0u);
  ASSERT_GT(nA, 0u);
  const std::pair<PassPart, uint64_t> calls[] = {
      {PassPart::Embed, 1},          {PassPart::NormsResidual, 3 * L + 1}, {PassPart::GdnProjections, nG},
      {PassPart::GdnRecurrence, nG}, {PassPart::GdnOutput, nG},            {PassPart::AttnProjections, nA},
      {PassPart::AttnCore, nA},      {PassPart::AttnOutput, nA},           {PassPart::Router, L},
      {PassPart::Routing, L},        {PassPart::Experts, L},               {PassPart::Combine, L},
      {PassPart::Head, 1}};
  int64_t parts_ns = 0;
  for (const auto& [part, n] : calls) {
    EXPECT_EQ(prof.part(part).calls, n) << backend::cpu::pass_part_name(part);
    parts_ns += prof.part(part).ns;
  }
  EXPECT_LE(parts_ns, prof.pass_ns());

  // The bytes: every dense weight once, k routed experts and the shared expert per layer, the head,
  // the cache's 11 positions (f32, the default).
  uint64_t gdn_in = 0, gdn_out = 0, attn_in = 0, attn_out = 0, router = 0, experts = 0, cache = 0;
  for (int il = 0; il < hp.n_layer; ++il) {
    const model::LayerWeights& lw = w.layers[il];
    if (lw.recurrent) {
      gdn_in += mat_bytes(lw.gdn.qkv) + mat_bytes(lw.gdn.gate) + mat_bytes(lw.gdn.beta) + mat_bytes(lw.gdn.alpha);
      gdn_out += mat_bytes(lw.gdn.out);
    } else {
      attn_in += mat_bytes(lw.attn.q) + mat_bytes(lw.attn.k) + mat_bytes(lw.attn.v);
      attn_out += mat_bytes(lw.attn.o);
      cache += 11 * 2 * dtype_row_bytes(DType::F32, static_cast<int64_t>(hp.n_head_kv) * hp.head_dim);
    }
    const model::MoeWeights& moe = lw.moe;
    router += mat_bytes(moe.router) + mat_bytes(moe.shared_gate_inp);
    experts += hp.n_expert_used * (mat_bytes(moe.gate.expert(0)) + mat_bytes(moe.up.expert(0)) + mat_bytes(moe.down.expert(0))) +
               mat_bytes(moe.shared_gate) + mat_bytes(moe.shared_up) + mat_bytes(moe.shared_down);
  }
  EXPECT_EQ(prof.part(PassPart::GdnProjections).bytes, gdn_in);
  EXPECT_EQ(prof.part(PassPart::GdnOutput).bytes, gdn_out);
  EXPECT_EQ(prof.part(PassPart::AttnProjections).bytes, attn_in);
  EXPECT_EQ(prof.part(PassPart::AttnOutput).bytes, attn_out);
  EXPECT_EQ(prof.part(PassPart::AttnCore).bytes, cache);
  EXPECT_EQ(prof.part(PassPart::Router).bytes, router);
  EXPECT_EQ(prof.part(PassPart::Experts).bytes, experts);
  EXPECT_EQ(prof.part(PassPart::Head).bytes, mat_bytes(w.output));
  EXPECT_EQ(prof.part(PassPart::Embed).bytes, w.token_embd.row_stride);

  const std::string report = prof.report();
  for (const auto& [part, n] : calls) EXPECT_NE(report.find(backend::cpu::pass_part_name(part)), std::string::npos);
  EXPECT_NE(report.find("other (outside the parts)"), std::string::npos);
  prof.clear();  // nothing printed at exit
  PassProfile::disable();
}

// Two sequences stacked in one pass: the projections run once over both, and are counted once.
TEST(PassProfile, AStackedPassCountsItsProjectionsOnce) {
  testing::TempDir d;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", synth::preset("tiny")));
  const model::HParams& hp = m->hp();
  backend::cpu::CpuExecutor cpu(*m, {2, 64});
  auto a = cpu.new_sequence(64, {}), b = cpu.new_sequence(64, {});
  const std::vector<int32_t> ta = testing::random_tokens(3, hp.n_vocab, 1), tb = testing::random_tokens(5, hp.n_vocab, 2);
  PassProfile& prof = PassProfile::enable();
  prof.clear();
  std::vector<Pass> passes = {Pass::causal(*a, ta, LogitRows::None, nullptr), Pass::causal(*b, tb, LogitRows::None, nullptr)};
  cpu.run(passes);
  EXPECT_EQ(prof.passes(), 1u);
  EXPECT_EQ(prof.tokens(), 8u);
  uint64_t gdn_in = 0;
  for (int il = 0; il < hp.n_layer; ++il) {
    const model::LayerWeights& lw = m->weights().layers[il];
    if (lw.recurrent) gdn_in += mat_bytes(lw.gdn.qkv) + mat_bytes(lw.gdn.gate) + mat_bytes(lw.gdn.beta) + mat_bytes(lw.gdn.alpha);
  }
  EXPECT_EQ(prof.part(PassPart::GdnProjections).bytes, gdn_in);
  EXPECT_EQ(prof.part(PassPart::Embed).bytes, 8 * m->weights().token_embd.row_stride);
  prof.clear();
  PassProfile::disable();
}

}  // namespace
}  // namespace clover
