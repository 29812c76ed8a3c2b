// The Vulkan executor against the CPU executor on the `mid` preset (8 layers, hidden 1024, 64
// experts top-8, vocabulary 32,000): the shapes where the tiny preset's single workgroups become
// many (several row chunks per matmul, experts of 8 routed rows each, 32,000-row head), teacher-
// forced over a 200-token prompt in Q4_0 (the type people run; F32 would be 1.7 GB on lavapipe), or
// 48 tokens in F16 with CLOVER_VK_MID_TYPE=F16. Label `vulkan`; 3-6 minutes on lavapipe, so it runs
// only with CLOVER_VK_MID=1 (like the long-context case's CLOVER_VK_LONG=1).
//
// The bounds are relative to a control: the CPU executor's own scalar kernels (the reference twins,
// which sum in other orders than the AVX-512 / AVX2 paths) against its fast kernels, on the same
// file and tokens. A random-weight `mid` router is nearly flat (64 experts, the 8th and 9th
// probabilities apart by a median 0.0016), so any rounding difference flips some routing choices
// and the flips grow layer by layer; measured (2026-12-02, lavapipe): CPU scalar vs CPU fast top-1
// 0.920, mean KL 0.98e-3, max |delta| 0.51, 153 routing flips (first in layer 2); Vulkan vs CPU fast
// 0.880, 1.18e-3, 0.52, 181 flips (first in layer 1), every flip at a CPU margin below 0.005; F16
// over 48 tokens: control 0.854, 4.4e-4, 23 flips; Vulkan 0.979, 1.2e-5, 1 flip. The
// issue's fixed 99 % / 1e-3 is met on trained weights (clover-tiny: top-1 1.000) but not even by
// the CPU's own second kernel set here, so this test asks Vulkan to stay within the control's
// spread, and every routing difference to be a near-tie. CLOVER_VK_MID_PLACEMENT keeps experts in
// RAM (issue #21's placements on mid): "n-cpu-moe:N" (the first N layers' experts), "cpu-moe", or
// an -ot pattern ("blk\.3\.ffn_.*_exps\.[0-9]$=cpu"); the CPU computes those in the hybrid pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_executor.h"
#include "backend/placement.h"
#include "kernels/cpu_features.h"
#include "backend/vulkan/executor/vulkan_executor.h"
#include "backend/vulkan/decode_test_util.h"
#include "backend/vulkan/executor_test_util.h"
#include "model/model_test_util.h"

namespace clover {
namespace {

using backend::LogitRows;
using backend::Pass;

// One causal pass over `toks` with every row's logits, and the routing decisions it made.
struct TracedRun {
  std::vector<float> logits;
  backend::PassStats stats;
  std::map<std::pair<int, int>, std::pair<std::string, float>> routes;  // (layer, pos) -> (chosen, margin)
  int n_past = 0;
};

TracedRun run_traced(backend::Executor& ex, const std::vector<int32_t>& toks, int V) {
  TracedRun r;
  r.logits.resize(toks.size() * V);
  auto seq = ex.new_sequence(256, {});
  std::FILE* f = std::tmpfile();
  ex.trace_routing(f);
  Pass p = Pass::causal(*seq, toks, LogitRows::All, r.logits.data());
  ex.run(p);
  ex.trace_routing(nullptr);
  r.stats = p.stats;
  r.n_past = seq->n_past();
  std::rewind(f);
  // Lines of backend::write_routing_trace: "layer pos e0,e1,... margin".
  int layer = 0, pos = 0;
  char chosen[512];
  float margin = 0;
  while (std::fscanf(f, "%d %d %511s %f", &layer, &pos, chosen, &margin) == 4) {
    std::vector<int> ids;
    for (const char* c = chosen; *c;) {
      ids.push_back(std::atoi(c));
      while (*c && *c != ',') ++c;
      if (*c == ',') ++c;
    }
    std::sort(ids.begin(), ids.end());
    std::string key;
    for (int e : ids) key += std::to_string(e) + ",";
    r.routes[{layer, pos}] = {key, margin};
  }
  std::fclose(f);
  return r;
}

// Where two runs chose different experts: how many (layer, token) pairs, the first layer, and the
// reference run's largest margin (8th-best minus best left-out probability) at such a pair.
struct Flips {
  int n = 0, first_layer = -1;
  float max_margin = 0;
};

Flips routing_flips(const TracedRun& ref, const TracedRun& other) {
  Flips x;
  for (const auto& [at, choice] : ref.routes) {
    auto it = other.routes.find(at);
    if (it != other.routes.end() && it->second.first == choice.first) continue;
    ++x.n;
    if (x.first_layer < 0 || at.first < x.first_layer) x.first_layer = at.first;
    x.max_margin = std::max(x.max_margin, choice.second);
  }
  return x;
}

// Top-1 agreement where the reference's best token leads its second by more than 0.25.
std::pair<int, int> decidable_agreement(const std::vector<float>& ref, const std::vector<float>& other, int V) {
  int decidable = 0, agree = 0;
  for (size_t t = 0; t < ref.size() / V; ++t) {
    const float* c = ref.data() + t * V;
    const float* v = other.data() + t * V;
    int b1 = 0, b2 = -1;
    for (int i = 1; i < V; ++i)
      if (c[i] > c[b1]) b2 = b1, b1 = i;
      else if (b2 < 0 || c[i] > c[b2]) b2 = i;
    if (c[b1] - c[b2] <= 0.25f) continue;
    ++decidable;
    agree += static_cast<int>(std::max_element(v, v + V) - v) == b1;
  }
  return {agree, decidable};
}

// The experts CLOVER_VK_MID_PLACEMENT keeps in RAM ("n-cpu-moe:N", "cpu-moe" or an -ot pattern;
// unset: none) and the planner's description of that placement.
std::pair<vulkan::ExpertsOnHost, std::string> placement_from_env(const model::Model& m) {
  const char* pl = std::getenv("CLOVER_VK_MID_PLACEMENT");
  if (!pl || !*pl) return {{}, "all experts on the device"};
  backend::PlacementRequest r;
  const std::string v = pl;
  if (v.rfind("n-cpu-moe:", 0) == 0)
    r.n_cpu_moe = std::stoi(v.substr(10));
  else if (v == "cpu-moe")
    r.cpu_moe = true;
  else
    r.overrides.push_back(backend::parse_tensor_override(v));
  const backend::Placement plan = backend::plan_placement(m.hp(), backend::tensor_table(m), r);
  return {plan.expert_on_host, plan.describe()};
}

TEST(VulkanMid, LogitsAgreeWithTheCpuExecutorAsCloseAsItsOwnKernelSets) {
  const char* on = std::getenv("CLOVER_VK_MID");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "several minutes on lavapipe: CLOVER_VK_MID=1 runs it";
  const char* ty = std::getenv("CLOVER_VK_MID_TYPE");
  const bool f16 = ty && std::string(ty) == "F16";
  const char* type_name = f16 ? "F16" : "Q4_0";
  testing::TempDir d;
  synth::SynthConfig c = synth::preset("mid");
  c.type = f16 ? DType::F16 : DType::Q4_0;
  auto m = model::Model::load(testing::write_synth(d, "mid.gguf", c));
  const int V = m->hp().n_vocab;
  const std::vector<int32_t> toks = testing::random_tokens(f16 ? 48 : 200, V, 21);
  const auto [on_host, placement] = placement_from_env(*m);
  std::printf("mid %s: %s\n", type_name, placement.c_str());
  VULKAN_OR_SKIP(vk, *m, 256, on_host);

  // The reference: the CPU executor with its fast kernels; the control: the same with the scalar
  // twins; the candidate: Vulkan.
  TracedRun ref, ctrl;
  {
    backend::cpu::CpuExecutor cpu(*m, {2, 256});
    ref = run_traced(cpu, toks, V);
  }
  {
    kernels::isa_force(kernels::Isa::Scalar);
    backend::cpu::CpuExecutor cpu(*m, {2, 256});
    ctrl = run_traced(cpu, toks, V);
    kernels::isa_force(kernels::isa_best());
  }
  const TracedRun got = run_traced(*vk, toks, V);

  const Agreement a_ctrl = compare(ref.logits, ctrl.logits, V), a_vk = compare(ref.logits, got.logits, V);
  const Flips f_ctrl = routing_flips(ref, ctrl), f_vk = routing_flips(ref, got);
  const auto [agree, decidable] = decidable_agreement(ref.logits, got.logits, V);
  for (const auto& [name, a, f] : {std::tuple{"CPU scalar (control)", a_ctrl, f_ctrl}, std::tuple{"Vulkan", a_vk, f_vk}})
    std::printf("mid %s, %s vs CPU: top-1 %.4f, mean KL %.3g, max |delta| %.3g; routing flips %d of %zu (first in layer %d, "
                "largest CPU margin at a flip %.3g)\n",
                type_name, name, a.top1, a.mean_kl, a.max_abs, f.n, ref.routes.size(), f.first_layer, f.max_margin);
  std::printf("mid %s: Vulkan top-1 where decidable (margin > 0.25): %d of %d\n", type_name, agree, decidable);

  EXPECT_GE(agree, decidable * 0.98);
  EXPECT_LE(a_vk.mean_kl, std::max(2.0 * a_ctrl.mean_kl, 1e-4));
  EXPECT_LE(f_vk.n, 2 * f_ctrl.n + 8);
  EXPECT_LT(f_vk.max_margin, 0.01f) << "a routing choice differs where the CPU's choice was not a near-tie";
  EXPECT_EQ(got.stats.tokens, static_cast<int64_t>(toks.size()));
  EXPECT_EQ(got.stats.expert_rows, ref.stats.expert_rows);
  EXPECT_EQ(got.n_past, static_cast<int>(toks.size()));
  expect_silent_validation(*vk);
}

// Guess-then-verify greedy equals AR greedy token for token, with the same final sequence state,
// on mid in the placement CLOVER_VK_MID_PLACEMENT names (issue #21: losslessness within the backend
// for every placement). mid's random router is nearly flat, so this holds only if a verify pass's
// rows are each bitwise the AR step's row, on the device and in the CPU's experts alike. Blocks of
// 8 keep the verify passes short on lavapipe; a random model's guesses are mostly rejected, so
// every cycle exercises the snapshot and replay.
TEST(VulkanMid, GuessThenVerifyEqualsArInThePlacement) {
  const char* on = std::getenv("CLOVER_VK_MID");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "minutes on lavapipe: CLOVER_VK_MID=1 runs it";
  testing::TempDir d;
  synth::SynthConfig c = synth::preset("mid");
  c.type = DType::Q4_0;
  auto m = model::Model::load(testing::write_synth(d, "mid.gguf", c));
  const auto [on_host, placement] = placement_from_env(*m);
  std::printf("mid Q4_0: %s\n", placement.c_str());
  VULKAN_OR_SKIP(vk, *m, 256, on_host);
  const std::vector<int32_t> prompt = testing::random_tokens(16, m->hp().n_vocab, 7);
  const DecodeRun ar = decode_on(*vk, *m, prompt, 16, "ar", 8);
  const DecodeRun spec = decode_on(*vk, *m, prompt, 16, "spec", 8);
  std::printf("mid Q4_0: AR %zu tokens; guess-then-verify %zu tokens in %lld verify passes\n", ar.out.size(), spec.out.size(),
              static_cast<long long>(spec.stats.denoise_passes));
  EXPECT_EQ(ar.out.size(), 16u);
  EXPECT_EQ(spec.out, ar.out);
  EXPECT_EQ(spec.state, ar.state) << "the final sequence states differ";
  EXPECT_GT(spec.stats.denoise_passes, 0);
  expect_silent_validation(*vk);
}

}  // namespace
}  // namespace clover
