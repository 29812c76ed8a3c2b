// -ngl N below the layer count (backend/layer_split.h): the first layers on the CPU executor, the
// rest and the head on the Vulkan executor, against the CPU executor alone, for -ngl 1, L/2 and
// L-1 of the tiny model (3 GDN layers and 1 attention layer: -ngl 1 leaves the device no
// recurrent state, -ngl L-1 leaves the CPU no KV cache): the whole-model bounds of
// executor_test.cpp, batch invariance (stacked passes bitwise equal to alone), denoising passes,
// guess-then-verify equal to AR greedy within the split, snapshots and the planner's account of
// what the device holds. Validation layer on, zero messages. Label `vulkan`.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/cpu_executor.h"
#include "backend/layer_split.h"
#include "backend/placement.h"
#include "backend/vulkan/decode_test_util.h"
#include "backend/vulkan/executor_test_util.h"
#include "model/model_test_util.h"

namespace clover {
namespace {

using backend::LogitRows;
using backend::Pass;
using testing::TempDir;

// The split of -ngl n_gpu (layers [0, L - n_gpu) on the CPU), or nullptr without a device.
std::unique_ptr<backend::LayerSplitExecutor> make_split(const model::Model& m, int n_gpu, int max_batch = 64,
                                                        vulkan::ExpertsOnHost experts_on_host = {}) {
  const int k = m.hp().n_layer - n_gpu;
  auto o = test_options(max_batch, std::move(experts_on_host));
  if (!o) return nullptr;
  o->first_layer = k;
  backend::cpu::CpuExecutor::Options c;
  c.n_threads = 2, c.max_batch = max_batch, c.n_layers = k;
  return std::make_unique<backend::LayerSplitExecutor>(std::make_unique<backend::cpu::CpuExecutor>(m, c),
                                                      std::make_unique<vulkan::VulkanExecutor>(m, *o));
}

struct SplitCase {
  DType type;
  model::Layout layout;
};

class LayerSplit : public ::testing::TestWithParam<SplitCase> {};

// Teacher forced over 70 tokens in passes of at most 32 (the long pass is cut as the device cuts
// it), every -ngl below L: the CPU's logits within the bounds, the same statistics, the same state
// size, and a device holding exactly the planner's weights of its layers.
TEST_P(LayerSplit, AgreesWithTheCpuExecutor) {
  TempDir d;
  const SplitCase sc = GetParam();
  auto m = tiny_model(d, sc.type, sc.layout);
  const model::HParams& hp = m->hp();
  const int V = hp.n_vocab, L = hp.n_layer;
  ASSERT_GE(L, 3);
  backend::cpu::CpuExecutor cpu(*m, {2, 32});
  const std::vector<int32_t> toks = testing::random_tokens(70, V, 11);
  auto cs = cpu.new_sequence(96, {});
  std::vector<float> ref(toks.size() * V);
  Pass pc = Pass::causal(*cs, toks, LogitRows::All, ref.data());
  cpu.run(pc);

  for (int n_gpu : {1, L / 2, L - 1}) {
    SCOPED_TRACE("-ngl " + std::to_string(n_gpu));
    auto split = make_split(*m, n_gpu, 32);
    if (!split) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
    auto ss = split->new_sequence(96, {});
    std::vector<float> got(toks.size() * V);
    Pass ps = Pass::causal(*ss, toks, LogitRows::All, got.data());
    split->run(ps);
    const Agreement a = compare(ref, got, V);
    std::printf("%s %s\n  -ngl %d: top-1 %.4f, mean KL %.3g, max |delta| %.3g; %s\n", std::string(dtype_name(sc.type)).c_str(),
                std::string(model::layout_name(sc.layout)).c_str(), n_gpu, a.top1, a.mean_kl, a.max_abs,
                split->placement().c_str());
    EXPECT_GE(a.top1, sc.type == DType::F32 ? 0.99 : 0.95);
    EXPECT_LE(a.mean_kl, 1e-3);
    if (sc.type == DType::F32) {
      EXPECT_LE(a.max_abs, 1e-3);
    }
    EXPECT_EQ(ps.stats.tokens, pc.stats.tokens);
    EXPECT_EQ(ps.stats.expert_rows, pc.stats.expert_rows);
    EXPECT_EQ(ss->n_past(), static_cast<int>(toks.size()));
    EXPECT_EQ(ss->committed_state().size(), cs->committed_state().size());
    EXPECT_EQ(ss->kv_bytes(), cs->kv_bytes());
    EXPECT_EQ(ss->recurrent_bytes(), cs->recurrent_bytes());

    // The device holds the weights of its own layers and the head, as the planner counts them.
    backend::PlacementRequest req;
    req.cpu_layers = L - n_gpu;
    const backend::Placement plan = backend::plan_placement(hp, backend::tensor_table(*m), req);
    const uint64_t weights = split->back().device().memory().bytes(vulkan::MemoryPurpose::Weights);
    EXPECT_GE(weights, plan.dense_weights + plan.expert_weights);
    EXPECT_LE(weights, plan.dense_weights + plan.expert_weights + 64 * 1024);
    EXPECT_EQ(split->back().device().memory().bytes(vulkan::MemoryPurpose::Cache), plan.kv * 96 / 4096);
    expect_silent_validation(split->back());
  }
}

INSTANTIATE_TEST_SUITE_P(Types, LayerSplit,
                         ::testing::Values(SplitCase{DType::F32, model::Layout::Official},
                                           SplitCase{DType::Q8_0, model::Layout::Qwen35Moe}),
                         [](const auto& i) {
                           return std::string(dtype_name(i.param.type)) +
                                  (i.param.layout == model::Layout::Official ? "_official" : "_qwen35moe");
                         });

// Several sequences in one pass give bitwise what each gives alone: two prefills stacked, then a
// decode step stacked with a denoising block; logits and the state left behind.
TEST(LayerSplitStacked, StackedPassesAreBitwiseInvariant) {
  TempDir d;
  auto m = tiny_model(d, DType::Q4_0);
  const model::HParams& hp = m->hp();
  const int V = hp.n_vocab, B = 8;
  auto split = make_split(*m, hp.n_layer / 2);
  if (!split) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
  const std::vector<int32_t> a = testing::random_tokens(7, V, 1), b = testing::random_tokens(5, V, 2);
  const std::vector<int32_t> step{a[2]};
  std::vector<int32_t> block(B, hp.mask_token);
  block[0] = b[1];
  std::vector<float> la(V), lb(V), sa(V), sb(V), ja(V), jb(static_cast<size_t>(B) * V), ka(V), kb(static_cast<size_t>(B) * V);
  auto alone_a = split->new_sequence(32, {}), alone_b = split->new_sequence(32, {});
  Pass pa = Pass::causal(*alone_a, a, LogitRows::Last, la.data()), pb = Pass::causal(*alone_b, b, LogitRows::Last, lb.data());
  split->run(pa);
  split->run(pb);
  Pass qa = Pass::causal(*alone_a, step, LogitRows::Last, ja.data());
  Pass qb = Pass::denoise(*alone_b, block, {}, jb.data(), hp.has_reverse_path);
  split->run(qa);
  split->run(qb);

  auto st_a = split->new_sequence(32, {}), st_b = split->new_sequence(32, {});
  std::vector<Pass> both{Pass::causal(*st_a, a, LogitRows::Last, sa.data()), Pass::causal(*st_b, b, LogitRows::Last, sb.data())};
  split->run(both);
  EXPECT_EQ(sa, la);
  EXPECT_EQ(sb, lb);
  std::vector<Pass> mixed{Pass::causal(*st_a, step, LogitRows::Last, ka.data()),
                          Pass::denoise(*st_b, block, {}, kb.data(), hp.has_reverse_path)};
  split->run(mixed);
  EXPECT_EQ(ka, ja);
  EXPECT_EQ(kb, jb);
  EXPECT_EQ(mixed[0].stats.expert_rows, qa.stats.expert_rows);
  EXPECT_EQ(mixed[1].stats.distinct_experts, qb.stats.distinct_experts);
  EXPECT_EQ(st_a->committed_state(), alone_a->committed_state());
  EXPECT_EQ(st_b->committed_state(), alone_b->committed_state());
  expect_silent_validation(split->back());
}

// Denoising passes against the CPU (the sequence left unchanged), guess-then-verify greedy equal to
// AR greedy token for token with the same final state, with the experts of the device's first
// layer in RAM on top of the split (--n-cpu-moe applies to the device's layers).
TEST(LayerSplitDecode, DenoisingAndGuessThenVerifyEqualAr) {
  TempDir d;
  auto m = tiny_model(d, DType::Q8_0);
  const model::HParams& hp = m->hp();
  const int V = hp.n_vocab, B = 16, L = hp.n_layer;
  backend::PlacementRequest req;
  req.cpu_layers = 1, req.n_cpu_moe = 2;  // layer 0 on the CPU, layer 1's experts in RAM
  const backend::Placement plan = backend::plan_placement(hp, backend::tensor_table(*m), req);
  ASSERT_EQ(plan.n_host_layers(), 1);
  ASSERT_EQ(plan.n_host_experts(1), hp.n_expert);
  ASSERT_EQ(plan.n_host_experts(0), 0);
  auto split = make_split(*m, L - 1, 64, plan.expert_on_host);
  if (!split) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
  backend::cpu::CpuExecutor cpu(*m, {2, 64});
  auto cs = cpu.new_sequence(64, {});
  auto ss = split->new_sequence(64, {});
  const std::vector<int32_t> prompt = testing::random_tokens(13, V, 5);
  Pass pc = Pass::causal(*cs, prompt, LogitRows::None, nullptr), ps = Pass::causal(*ss, prompt, LogitRows::None, nullptr);
  cpu.run(pc);
  split->run(ps);
  const std::vector<uint8_t> state = ss->committed_state();
  std::vector<int32_t> block(B, hp.mask_token);
  block[0] = prompt[3], block[5] = prompt[7];
  const std::vector<int32_t> rows{0, 4, 9, 15};
  std::vector<float> lc(static_cast<size_t>(B) * V), lv(static_cast<size_t>(B) * V);
  Pass dc = Pass::denoise(*cs, block, rows, lc.data(), hp.has_reverse_path);
  Pass dv = Pass::denoise(*ss, block, rows, lv.data(), hp.has_reverse_path);
  cpu.run(dc);
  split->run(dv);
  std::vector<float> rc, rv;  // the wanted rows only
  for (int32_t r : rows) {
    rc.insert(rc.end(), lc.begin() + static_cast<int64_t>(r) * V, lc.begin() + static_cast<int64_t>(r + 1) * V);
    rv.insert(rv.end(), lv.begin() + static_cast<int64_t>(r) * V, lv.begin() + static_cast<int64_t>(r + 1) * V);
  }
  const Agreement a = compare(rc, rv, V);
  std::printf("Q8_0 -ngl %d + experts of layer 1 in RAM, denoise: top-1 %.4f, mean KL %.3g\n", L - 1, a.top1, a.mean_kl);
  EXPECT_GE(a.top1, 0.95);
  EXPECT_LE(a.mean_kl, 1e-3);
  EXPECT_EQ(ss->committed_state(), state);

  const DecodeRun ar = decode_on(*split, *m, prompt, 14, "ar", 6);
  const DecodeRun spec = decode_on(*split, *m, prompt, 14, "spec", 6);
  EXPECT_EQ(spec.out, ar.out);
  EXPECT_EQ(spec.state, ar.state) << "the final sequence states differ";
  EXPECT_GT(spec.stats.denoise_passes, 0);
  expect_silent_validation(split->back());
}

// Snapshots hold both sides: restore, and the same tokens give the same logits and state, bit for
// bit; truncate is refused (recurrent layers) without moving either side; reset empties both;
// either side is refused as a whole-model executor.
TEST(LayerSplitSequence, SnapshotRestoreTruncateReset) {
  TempDir d;
  auto m = tiny_model(d, DType::F32);
  const int V = m->hp().n_vocab;
  auto split = make_split(*m, 1);
  if (!split) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
  auto s = split->new_sequence(48, {});
  const std::vector<int32_t> a = testing::random_tokens(9, V, 3), b = testing::random_tokens(4, V, 4);
  std::vector<float> first(V), again(V);
  Pass pa = Pass::causal(*s, a, LogitRows::None, nullptr);
  split->run(pa);
  auto snap = s->new_snapshot();
  s->save(*snap);
  EXPECT_EQ(snap->n_past(), 9);
  EXPECT_EQ(snap->bytes(), s->recurrent_bytes());
  const std::vector<uint8_t> at_snapshot = s->committed_state();
  Pass pb = Pass::causal(*s, b, LogitRows::Last, first.data());
  split->run(pb);
  const std::vector<uint8_t> after = s->committed_state();
  EXPECT_THROW(s->truncate(9), model::ModelError);
  EXPECT_EQ(s->n_past(), 13);
  EXPECT_EQ(s->committed_state(), after);
  s->restore(*snap);
  EXPECT_EQ(s->n_past(), 9);
  EXPECT_EQ(s->committed_state(), at_snapshot);
  Pass pb2 = Pass::causal(*s, b, LogitRows::Last, again.data());
  split->run(pb2);
  EXPECT_EQ(again, first);
  EXPECT_EQ(s->committed_state(), after);
  s->reset();
  EXPECT_EQ(s->n_past(), 0);
  Pass pa2 = Pass::causal(*s, a, LogitRows::None, nullptr);
  split->run(pa2);
  EXPECT_EQ(s->committed_state(), at_snapshot);
  // A sequence of another backend is refused before anything runs.
  backend::cpu::CpuExecutor cpu(*m, {2, 64});
  auto other = cpu.new_sequence(16, {});
  Pass bad = Pass::causal(*other, a, LogitRows::None, nullptr);
  EXPECT_THROW(split->run(bad), model::ModelError);
  // Either side alone is refused as a whole-model executor (it has only some of the layers).
  backend::cpu::CpuExecutor front(*m, {2, 64, 2});
  auto fs = front.new_sequence(16, {});
  std::vector<float> out(V);
  Pass pf = Pass::causal(*fs, a, LogitRows::Last, out.data());
  EXPECT_THROW(front.run(pf), model::ModelError);
  EXPECT_EQ(fs->n_past(), 0);
  auto bs = split->back().new_sequence(16, {});
  Pass pv = Pass::causal(*bs, a, LogitRows::Last, out.data());
  EXPECT_THROW(split->back().run(pv), model::ModelError);
  EXPECT_EQ(bs->n_past(), 0);
  expect_silent_validation(split->back());
}

}  // namespace
}  // namespace clover
