// Experts in host RAM (issue #21): the Vulkan executor with the routed experts of some layers kept
// in RAM and computed by the CPU expert runner, against the CPU executor, for every placement of
// the tiny model (none, --n-cpu-moe 1..all, --cpu-moe, an override; per expert: half a layer's
// experts, experts {0, 3, 5} of a layer, a budget's boundary layer): logits within the bounds of
// executor_test.cpp, the device's weight account smaller by exactly the experts kept in RAM and
// equal to the planner's, denoising passes, guess-then-verify equal to AR within the backend, and
// the CPU's experts computed beside the device's part of the layer bitwise as the serial twin.
// Validation layer on, zero messages. Label `vulkan`; the tiny model keeps it short on lavapipe.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_executor.h"
#include "backend/placement.h"
#include "backend/vulkan/decode_test_util.h"
#include "backend/vulkan/executor_test_util.h"
#include "model/model_test_util.h"

namespace clover {
namespace {

using backend::LogitRows;
using backend::Pass;
using testing::TempDir;

vulkan::ExpertsOnHost placement_of(const model::Model& m, int n_cpu_moe, bool cpu_moe, const std::string& ot = {},
                                   uint64_t budget = 0) {
  backend::PlacementRequest r;
  r.n_cpu_moe = n_cpu_moe, r.cpu_moe = cpu_moe, r.budget = budget;
  if (!ot.empty()) r.overrides.push_back(backend::parse_tensor_override(ot));
  return backend::plan_placement(m.hp(), backend::tensor_table(m), r).expert_on_host;
}

// Per layer: D (every expert on the device), H (every expert in RAM), or the experts in RAM:
// "D(0,3,5)DD".
std::string describe(const vulkan::ExpertsOnHost& on_host) {
  std::string s;
  for (const std::vector<bool>& l : on_host) {
    const int n = static_cast<int>(std::count(l.begin(), l.end(), true));
    if (n == 0 || n == static_cast<int>(l.size())) {
      s += n ? 'H' : 'D';
      continue;
    }
    std::string e;
    for (size_t i = 0; i < l.size(); ++i)
      if (l[i]) e += (e.empty() ? "" : ",") + std::to_string(i);
    s += "(" + e + ")";
  }
  return s;
}

int host_experts(const vulkan::ExpertsOnHost& on_host) {
  int n = 0;
  for (const std::vector<bool>& l : on_host) n += static_cast<int>(std::count(l.begin(), l.end(), true));
  return n;
}

// One placement's teacher-forced logits against the CPU executor's (ref, over toks) within the
// bounds of executor_test.cpp, and the device's weight account: smaller than weights_all_device
// (0: not known yet, set from this run) by exactly the experts kept in RAM, within 64 KiB of the
// planner's; its scratch below the planner's compute bound.
void expect_placement_agrees(const model::Model& m, DType type, const std::vector<int32_t>& toks, const std::vector<float>& ref,
                             const backend::PassStats& ref_stats, const vulkan::ExpertsOnHost& on_host,
                             uint64_t& weights_all_device) {
  SCOPED_TRACE(describe(on_host));
  const int V = m.hp().n_vocab;
  auto vk = make_vulkan(m, 64, on_host);
  if (!vk) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
  auto vs = vk->new_sequence(64, {});
  std::vector<float> got(toks.size() * V);
  Pass pv = Pass::causal(*vs, toks, LogitRows::All, got.data());
  vk->run(pv);
  const Agreement a = compare(ref, got, V);
  std::printf("%s %s: top-1 %.4f, mean KL %.3g, max |delta| %.3g; %s\n", std::string(dtype_name(type)).c_str(),
              describe(on_host).c_str(), a.top1, a.mean_kl, a.max_abs, vk->memory_summary().c_str());
  EXPECT_GE(a.top1, 0.99);
  EXPECT_LE(a.mean_kl, 1e-3);
  if (type == DType::F32) {
    EXPECT_LE(a.max_abs, 1e-3);
  }
  EXPECT_EQ(pv.stats.expert_rows, ref_stats.expert_rows);
  EXPECT_EQ(vs->n_past(), static_cast<int>(toks.size()));

  // The device holds the weights the planner says: the experts kept in RAM are not uploaded.
  const backend::Placement plan = backend::plan_placement(m.hp(), backend::tensor_table(m), {});
  const uint64_t in_ram = plan.expert_bytes * static_cast<uint64_t>(host_experts(on_host));
  const uint64_t weights = vk->device().memory().bytes(vulkan::MemoryPurpose::Weights);
  if (weights_all_device == 0) weights_all_device = weights;
  // Each expert tensor of a split layer is one buffer of its device experts, rounded up by the
  // driver (a few hundred bytes at most).
  int split = 0;
  for (const std::vector<bool>& l : on_host) {
    const auto n = std::count(l.begin(), l.end(), true);
    split += n > 0 && n < static_cast<long>(l.size());
  }
  const double saved = static_cast<double>(weights_all_device - weights);
  EXPECT_NEAR(saved, static_cast<double>(in_ram), 3 * 1024.0 * split);
  // The device's own account against the planner's (buffers are rounded up to 4 bytes at least).
  EXPECT_GE(weights, plan.dense_weights + plan.expert_weights - in_ram);
  EXPECT_LE(weights, plan.dense_weights + plan.expert_weights - in_ram + 64 * 1024);
  EXPECT_LE(vk->device().memory().bytes(vulkan::MemoryPurpose::Scratch), plan.compute);
  if (host_experts(on_host) > 0) {
    EXPECT_NE(vk->memory_summary().find(fmt::format("routed experts in RAM {} of", host_experts(on_host))), std::string::npos)
        << vk->memory_summary();
  }
  expect_silent_validation(*vk);
}

class VulkanHybrid : public ::testing::TestWithParam<DType> {};

// The tiny model in one type and the CPU executor's teacher-forced logits over 40 random tokens:
// what every placement is compared with.
struct CpuReference {
  DType type;
  std::unique_ptr<model::Model> m;
  std::vector<int32_t> toks;
  std::vector<float> logits;
  backend::PassStats stats;
};

CpuReference cpu_reference(const TempDir& d, DType type) {
  CpuReference r{type, tiny_model(d, type), {}, {}, {}};
  const int V = r.m->hp().n_vocab;
  backend::cpu::CpuExecutor cpu(*r.m, {2, 64});
  r.toks = testing::random_tokens(40, V, 11);
  auto cs = cpu.new_sequence(64, {});
  r.logits.resize(r.toks.size() * V);
  Pass pc = Pass::causal(*cs, r.toks, LogitRows::All, r.logits.data());
  cpu.run(pc);
  r.stats = pc.stats;
  return r;
}

TEST_P(VulkanHybrid, EveryPlacementAgreesWithTheCpuExecutor) {
  TempDir d;
  const CpuReference r = cpu_reference(d, GetParam());
  const model::Model* m = r.m.get();
  const int L = m->hp().n_layer;

  std::vector<vulkan::ExpertsOnHost> placements{placement_of(*m, 0, false)};
  for (int n = 1; n <= L; ++n) placements.push_back(placement_of(*m, n, false));
  placements.push_back(placement_of(*m, 0, true));
  placements.push_back(placement_of(*m, 0, false, R"(blk\.(1|3)\.ffn_(gate|up|down)_exps=cpu)"));
  ASSERT_EQ(describe(placements.back()), "DHDH");
  uint64_t weights_all_device = 0;
  for (const vulkan::ExpertsOnHost& on_host : placements)
    expect_placement_agrees(*m, r.type, r.toks, r.logits, r.stats, on_host, weights_all_device);
}

// Per-expert placement: a layer's experts split between the device and RAM; the device computes
// its experts over their routed rows, the CPU the others, the sums meet in the device's combine.
TEST_P(VulkanHybrid, PerExpertPlacementsAgreeWithTheCpuExecutor) {
  TempDir d;
  const CpuReference r = cpu_reference(d, GetParam());
  const model::Model* m = r.m.get();
  const model::HParams& hp = m->hp();
  ASSERT_EQ(hp.n_expert, 8);

  // Half of layer 1's experts; experts {0, 3, 5} of layer 2 (one tensor's virtual names move all
  // three); the budget's boundary layer: layer 0 whole and 3 of layer 1's 8 experts in RAM.
  std::vector<vulkan::ExpertsOnHost> placements;
  placements.push_back(placement_of(*m, 0, false, R"(blk\.1\.ffn_.*_exps\.[0-3]$=cpu)"));
  ASSERT_EQ(describe(placements.back()), "D(0,1,2,3)DD");
  placements.push_back(placement_of(*m, 0, false, R"(blk\.2\.ffn_up_exps\.(0|3|5)$=cpu)"));
  ASSERT_EQ(describe(placements.back()), "DD(0,3,5)D");
  const backend::Placement all = backend::plan_placement(hp, backend::tensor_table(*m), {});
  placements.push_back(placement_of(*m, 0, false, {}, all.device_total() - 10 * all.expert_bytes - all.expert_bytes / 2));
  ASSERT_EQ(describe(placements.back()), "H(5,6,7)DD");
  uint64_t weights_all_device = 0;
  expect_placement_agrees(*m, r.type, r.toks, r.logits, r.stats, placement_of(*m, 0, false), weights_all_device);
  for (const vulkan::ExpertsOnHost& on_host : placements)
    expect_placement_agrees(*m, r.type, r.toks, r.logits, r.stats, on_host, weights_all_device);
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanHybrid, ::testing::Values(DType::F32, DType::Q4_0),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

// Denoising passes with experts in RAM: the CPU's logits, the sequence unchanged; then
// guess-then-verify greedy equals AR greedy token for token with the same state. Placements: the
// experts of half the layers in RAM, and per expert experts {0, 3, 5} of layer 1 and half of
// layer 3's.
class VulkanHybridDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(VulkanHybridDecode, DenoisingPassesAndGuessThenVerifyWithExpertsInRam) {
  TempDir d;
  auto m = tiny_model(d, DType::Q8_0);
  const model::HParams& hp = m->hp();
  const int V = hp.n_vocab, B = 16;
  const vulkan::ExpertsOnHost on_host = GetParam() == "layers" ? placement_of(*m, 2, false)
                                        : placement_of(*m, 0, false, R"(blk\.1\.ffn_gate_exps\.(0|3|5)$|blk\.3\.ffn_down_exps\.[4-7]$=cpu)");
  ASSERT_EQ(describe(on_host), GetParam() == "layers" ? "HHDD" : "D(0,3,5)D(4,5,6,7)");
  auto vk = make_vulkan(*m, 64, on_host);
  if (!vk) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
  backend::cpu::CpuExecutor cpu(*m, {2, 64});
  auto cs = cpu.new_sequence(64, {});
  auto vs = vk->new_sequence(64, {});
  const std::vector<int32_t> prompt = testing::random_tokens(13, V, 5);
  Pass pc = Pass::causal(*cs, prompt, LogitRows::None, nullptr), pv = Pass::causal(*vs, prompt, LogitRows::None, nullptr);
  cpu.run(pc);
  vk->run(pv);
  const std::vector<uint8_t> state = vs->committed_state();
  std::vector<int32_t> block(B, hp.mask_token);
  block[0] = prompt[3], block[5] = prompt[7];
  std::vector<float> lc(static_cast<size_t>(B) * V), lv(static_cast<size_t>(B) * V);
  Pass dc = Pass::denoise(*cs, block, {}, lc.data(), hp.has_reverse_path);
  Pass dv = Pass::denoise(*vs, block, {}, lv.data(), hp.has_reverse_path);
  cpu.run(dc);
  vk->run(dv);
  const Agreement a = compare(lc, lv, V);
  std::printf("Q8_0 %s denoise: top-1 %.4f, mean KL %.3g\n", describe(on_host).c_str(), a.top1, a.mean_kl);
  EXPECT_GE(a.top1, 0.95);
  EXPECT_LE(a.mean_kl, 1e-3);
  EXPECT_EQ(vs->committed_state(), state);

  const DecodeRun ar = decode_on(*vk, *m, prompt, 14, "ar", 6);
  const DecodeRun spec = decode_on(*vk, *m, prompt, 14, "spec", 6);
  EXPECT_EQ(spec.out, ar.out);
  EXPECT_EQ(spec.state, ar.state) << "the final sequence states differ";
  EXPECT_GT(spec.stats.denoise_passes, 0);
  expect_silent_validation(*vk);
}

INSTANTIATE_TEST_SUITE_P(Placements, VulkanHybridDecode, ::testing::Values("layers", "experts"),
                         [](const auto& i) { return i.param; });

// The CPU computes the experts in RAM while the device runs the layer's shared expert and its own
// experts: the same logits and state, bit for bit, as the plain twin in which each waits for the
// other (Options::overlap_host_experts = false), one overlapped step per layer with experts in RAM
// and pass; for whole layers in RAM, a split layer (the device's experts run beside the CPU's),
// and experts streamed to the device beside the device's part (--stream-experts 6).
TEST(VulkanHybridOverlap, CpuExpertsBesideTheDevicePartAreBitwiseTheSerialTwin) {
  TempDir d;
  auto m = tiny_model(d, DType::Q4_0);
  const int V = m->hp().n_vocab;
  const std::vector<int32_t> toks = testing::random_tokens(40, V, 11);
  struct Case {
    vulkan::ExpertsOnHost on_host;
    int stream_rows, hybrid_layers;
  };
  const std::vector<Case> cases{{placement_of(*m, 2, false), 0, 2},
                                {placement_of(*m, 0, false, R"(blk\.1\.ffn_.*_exps\.[0-3]$=cpu)"), 0, 1},
                                {placement_of(*m, 0, true), 6, 4}};
  for (const Case& c : cases) {
    SCOPED_TRACE(describe(c.on_host));
    auto opts = test_options(64, c.on_host, c.stream_rows);
    if (!opts) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
    auto serial_opts = *opts;
    serial_opts.overlap_host_experts = false;
    vulkan::VulkanExecutor beside(*m, *opts), serial(*m, serial_opts);
    std::vector<float> lb(toks.size() * V), ls(toks.size() * V);
    auto sb = beside.new_sequence(64, {}), ss = serial.new_sequence(64, {});
    Pass pb = Pass::causal(*sb, toks, LogitRows::All, lb.data()), ps = Pass::causal(*ss, toks, LogitRows::All, ls.data());
    beside.run(pb);
    serial.run(ps);
    EXPECT_EQ(lb, ls);
    EXPECT_EQ(sb->committed_state(), ss->committed_state());
    // A decode step too (one row per expert: recorded as its own shape).
    const std::vector<int32_t> one{toks[3]};
    std::vector<float> db(V), ds(V);
    Pass qb = Pass::causal(*sb, one, LogitRows::Last, db.data()), qs = Pass::causal(*ss, one, LogitRows::Last, ds.data());
    beside.run(qb);
    serial.run(qs);
    EXPECT_EQ(db, ds);
    EXPECT_EQ(beside.overlapped_host_steps(), 2u * c.hybrid_layers);
    EXPECT_EQ(serial.overlapped_host_steps(), 0u);
    if (c.stream_rows) {
      EXPECT_GT(beside.streamed_experts(), 0u);
    }
    expect_silent_validation(beside);
    expect_silent_validation(serial);
  }
}

// Batch invariance with experts in RAM: two sequences' passes stacked into one give each the
// logits and state it gets alone, bit for bit (the CPU runner's rows do not depend on each other).
TEST(VulkanHybridStacked, StackedPassesAreBitwiseInvariant) {
  TempDir d;
  auto m = tiny_model(d, DType::Q4_0);
  const int V = m->hp().n_vocab;
  auto vk = make_vulkan(*m, 64, placement_of(*m, 0, false, R"(blk\.[02]\.ffn_up_exps=cpu)"));
  if (!vk) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
  const std::vector<int32_t> a = testing::random_tokens(7, V, 1), b = testing::random_tokens(5, V, 2);
  std::vector<float> la(V), lb(V), sa(V), sb(V);
  auto alone_a = vk->new_sequence(32, {}), alone_b = vk->new_sequence(32, {});
  Pass pa = Pass::causal(*alone_a, a, LogitRows::Last, la.data()), pb = Pass::causal(*alone_b, b, LogitRows::Last, lb.data());
  vk->run(pa);
  vk->run(pb);
  auto st_a = vk->new_sequence(32, {}), st_b = vk->new_sequence(32, {});
  std::vector<Pass> both{Pass::causal(*st_a, a, LogitRows::Last, sa.data()), Pass::causal(*st_b, b, LogitRows::Last, sb.data())};
  vk->run(both);
  EXPECT_EQ(sa, la);
  EXPECT_EQ(sb, lb);
  EXPECT_EQ(st_a->committed_state(), alone_a->committed_state());
  EXPECT_EQ(st_b->committed_state(), alone_b->committed_state());
  expect_silent_validation(*vk);
}

// --stream-experts: experts in RAM with at least N rows in a pass are uploaded to the device's
// staging and computed there. With every expert in RAM and N = 1 every routed expert streams, and
// the logits are the all-device pass's bit for bit (the same shaders on the same rows); with N = 6
// some stream and the CPU computes the rest, within the bounds against the CPU executor; N = 0
// (never) is the CPU's path. A decode step (one row per expert) streams nothing at N = 6.
TEST(VulkanHybridStream, StreamedExpertsEqualTheDeviceExperts) {
  TempDir d;
  auto m = tiny_model(d, DType::Q4_0);
  const int V = m->hp().n_vocab;
  const std::vector<int32_t> toks = testing::random_tokens(40, V, 11);
  auto logits_of = [&](vulkan::VulkanExecutor& vk) {
    auto vs = vk.new_sequence(64, {});
    std::vector<float> out(toks.size() * V);
    Pass p = Pass::causal(*vs, toks, LogitRows::All, out.data());
    vk.run(p);
    return out;
  };
  auto all_device = make_vulkan(*m, 64);
  if (!all_device) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
  const std::vector<float> ref_dev = logits_of(*all_device);
  backend::cpu::CpuExecutor cpu(*m, {2, 64});
  auto cs = cpu.new_sequence(64, {});
  std::vector<float> ref_cpu(toks.size() * V);
  Pass pc = Pass::causal(*cs, toks, LogitRows::All, ref_cpu.data());
  cpu.run(pc);

  const vulkan::ExpertsOnHost in_ram = placement_of(*m, 0, true);
  auto every = make_vulkan(*m, 64, in_ram, 1);
  EXPECT_EQ(logits_of(*every), ref_dev);
  EXPECT_GT(every->streamed_experts(), 0u);
  backend::PlacementRequest r;
  r.cpu_moe = true, r.stream_experts = 1;
  const backend::Placement plan = backend::plan_placement(m->hp(), backend::tensor_table(*m), r);
  EXPECT_EQ(plan.stream, backend::kStreamedExperts * plan.expert_bytes);
  EXPECT_LE(every->device().memory().bytes(vulkan::MemoryPurpose::Scratch), plan.compute + plan.stream);
  expect_silent_validation(*every);

  auto some = make_vulkan(*m, 64, in_ram, 6);
  const std::vector<float> mixed = logits_of(*some);
  const uint64_t streamed = some->streamed_experts();
  const Agreement a = compare(ref_cpu, mixed, V);
  std::printf("Q4_0 HHHH, --stream-experts 6: %llu of the pass's routed experts streamed; top-1 %.4f, mean KL %.3g\n",
              static_cast<unsigned long long>(streamed), a.top1, a.mean_kl);
  EXPECT_GT(streamed, 0u);
  EXPECT_LT(streamed, every->streamed_experts());
  EXPECT_GE(a.top1, 0.99);
  EXPECT_LE(a.mean_kl, 1e-3);
  // A decode step: one row, no expert reaches 6 rows.
  auto vs = some->new_sequence(64, {});
  std::vector<float> one(V);
  const std::vector<int32_t> first_token{toks[0]};
  Pass step = Pass::causal(*vs, first_token, LogitRows::Last, one.data());
  some->run(step);
  EXPECT_EQ(some->streamed_experts(), streamed);
  expect_silent_validation(*some);

  auto never = make_vulkan(*m, 64, in_ram, 0);
  const Agreement n = compare(ref_cpu, logits_of(*never), V);
  EXPECT_EQ(never->streamed_experts(), 0u);
  EXPECT_GE(n.top1, 0.99);
  EXPECT_LE(n.mean_kl, 1e-3);
}

}  // namespace
}  // namespace clover
