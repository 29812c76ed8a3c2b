// The placement planner (backend/placement.h) on the full-size clover-35b Q4_0 tensor table (built
// from the synth preset, no file written) and on flags: the ladder of device budgets fits what it
// claims, a budget too small is refused naming what would fit, the flags place what they say.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "backend/placement.h"
#include "synth/synth.h"

namespace clover::backend {
namespace {

constexpr uint64_t GiB = 1ull << 30;

struct Table {
  model::HParams hp;
  std::vector<TensorSize> tensors;
};

Table table_of(const synth::SynthConfig& c) {
  Table t;
  t.hp = synth::hparams_of(c);
  for (const synth::TensorShape& s : synth::tensor_shapes(c)) t.tensors.push_back({s.name, s.type, s.bytes()});
  return t;
}

Table clover35b_q4_0() {
  synth::SynthConfig c = synth::preset("clover-35b");
  c.mixture = "Q4_0";
  return table_of(c);
}

// Per layer: all of its experts in RAM.
std::vector<bool> layers_on_host(const Placement& p) {
  std::vector<bool> v;
  for (size_t il = 0; il < p.expert_on_host.size(); ++il) v.push_back(p.n_host_experts(static_cast<int>(il)) == static_cast<int>(p.expert_on_host[il].size()));
  return v;
}

// The experts of layer il in RAM.
std::vector<int> host_experts(const Placement& p, int il) {
  std::vector<int> v;
  for (size_t e = 0; e < p.expert_on_host[il].size(); ++e)
    if (p.expert_on_host[il][e]) v.push_back(static_cast<int>(e));
  return v;
}

PlacementRequest request(uint64_t budget, int64_t n_ctx) {
  PlacementRequest r;
  r.budget = budget;
  r.n_ctx = n_ctx;
  r.kv = {DType::F16, DType::F16};
  return r;
}

TEST(Placement, Clover35bShapesAreTheFullModel) {
  const Table t = clover35b_q4_0();
  uint64_t total = 0;
  for (const TensorSize& s : t.tensors) total += s.bytes;
  // The official Q4_0 file is 19.6 GB; ours has the same shapes and the Q4_0 preset's types.
  EXPECT_GT(total, 18.5e9);
  EXPECT_LT(total, 21.0e9);
  const Placement p = plan_placement(t.hp, t.tensors, request(0, 16384));
  EXPECT_EQ(p.n_host_layers(), 0);
  // 3 x 256 experts of 512 x 2048 Q4_0 per layer.
  EXPECT_EQ(p.expert_bytes_per_layer, 3ull * 256 * 512 * 2048 / 32 * 18);
}

TEST(Placement, LadderFitsEveryBudgetAndKeepsMoreExpertsInRamAsItShrinks) {
  const Table t = clover35b_q4_0();
  for (int64_t n_ctx : {16384, 131072}) {
    int prev_host = -1;
    for (uint64_t gb : {24, 16, 12, 8}) {
      const Placement p = plan_placement(t.hp, t.tensors, request(gb * GiB, n_ctx));
      SCOPED_TRACE(testing::Message() << gb << " GiB, " << n_ctx << " tokens: " << p.describe());
      EXPECT_LE(p.device_total(), gb * GiB);
      EXPECT_GE(p.n_host_layers(), prev_host);
      prev_host = p.n_host_layers();
      // As many experts on the device as fit: one more would not (the budget is used to within
      // one expert).
      if (p.any_on_host()) {
        EXPECT_GT(p.device_total() + p.expert_bytes, gb * GiB);
      }
      // The first layers go to RAM first, whole; then at most one layer, the boundary, is split:
      // its experts 0..n-1 on the device, the rest in RAM.
      EXPECT_LE(p.n_split_layers(), 1);
      for (int il = 0; il < t.hp.n_layer; ++il) {
        const int h = p.n_host_experts(il);
        if (il > 0 && h > 0) {
          EXPECT_EQ(p.n_host_experts(il - 1), t.hp.n_expert);
        }
        if (h > 0 && h < t.hp.n_expert) {
          const std::vector<int> e = host_experts(p, il);
          EXPECT_EQ(e.front(), t.hp.n_expert - h);
          EXPECT_EQ(e.back(), t.hp.n_expert - 1);
          EXPECT_NE(p.describe().find(fmt::format("{} of layer {}'s {}", h, il, t.hp.n_expert)), std::string::npos)
              << p.describe();
        }
      }
      EXPECT_EQ(p.kv, kv_bytes_for(t.hp, n_ctx, {DType::F16, DType::F16}));
      int n_host = 0;
      for (int il = 0; il < t.hp.n_layer; ++il) n_host += p.n_host_experts(il);
      EXPECT_GE(p.host_weights, n_host * p.expert_bytes);
      EXPECT_EQ(p.expert_weights, (t.hp.n_layer * t.hp.n_expert - n_host) * p.expert_bytes);
    }
  }
  // 24 GiB holds everything at 16K; 8 GiB needs most experts in RAM.
  EXPECT_EQ(plan_placement(t.hp, t.tensors, request(24 * GiB, 16384)).n_host_layers(), 0);
  EXPECT_GT(plan_placement(t.hp, t.tensors, request(8 * GiB, 131072)).n_host_layers(), 20);
}

TEST(Placement, TooSmallBudgetIsRefusedNamingWhatWouldFit) {
  const Table t = clover35b_q4_0();
  try {
    plan_placement(t.hp, t.tensors, request(2 * GiB, 131072));
    FAIL() << "2 GiB cannot hold the dense part and a 131072-token KV cache";
  } catch (const model::ModelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Would fit: --vram-budget"), std::string::npos) << m;
    EXPECT_NE(m.find("-c "), std::string::npos) << m;  // a shorter context fits this budget
    EXPECT_NE(m.find("-ngl 39 or less"), std::string::npos) << m;  // or fewer layers on the device
  }
  // The budget the message names does fit.
  const Placement all_host = plan_placement(t.hp, t.tensors, [&] {
    PlacementRequest r = request(0, 131072);
    r.cpu_moe = true;
    return r;
  }());
  EXPECT_NO_THROW(plan_placement(t.hp, t.tensors, request(all_host.device_total() + 1, 131072)));
  EXPECT_THROW(plan_placement(t.hp, t.tensors, request(all_host.device_total() - 1, 131072)), model::ModelError);
}

TEST(Placement, FlagsPlaceWhatTheySay) {
  const Table t = table_of(synth::preset("tiny"));
  const int L = t.hp.n_layer;
  PlacementRequest r = request(0, 256);
  const Placement none = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(none.n_host_layers(), 0);
  r.n_cpu_moe = 2;
  Placement p = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(layers_on_host(p), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(p.expert_weights, none.expert_weights / 2);
  EXPECT_EQ(p.device_total() + 2 * p.expert_bytes_per_layer, none.device_total());
  r.n_cpu_moe = 99;  // more than the layers: all of them, as llama.cpp
  EXPECT_EQ(plan_placement(t.hp, t.tensors, r).n_host_layers(), L);
  r.n_cpu_moe = 0;
  r.cpu_moe = true;
  p = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(p.n_host_layers(), L);
  EXPECT_EQ(p.expert_weights, 0u);
  EXPECT_EQ(p.dense_weights, none.dense_weights);
  // Overrides: the last match wins; one expert tensor moves its layer.
  r.cpu_moe = false;
  r.overrides = {parse_tensor_override(R"(blk\.(1|3)\.ffn_down_exps=cpu)")};
  EXPECT_EQ(layers_on_host(plan_placement(t.hp, t.tensors, r)), (std::vector<bool>{false, true, false, true}));
  r.cpu_moe = true;
  r.overrides = {parse_tensor_override(R"(blk\.0\.ffn_.*_exps=Vulkan0)")};
  EXPECT_EQ(layers_on_host(plan_placement(t.hp, t.tensors, r)), (std::vector<bool>{false, true, true, true}));
  // The dense part cannot stay in RAM.
  r.overrides = {parse_tensor_override(R"(attn_q=cpu)")};
  EXPECT_THROW(plan_placement(t.hp, t.tensors, r), model::ModelError);
  r.overrides.clear();
  r.n_cpu_moe = -1;
  r.cpu_moe = false;
  EXPECT_THROW(plan_placement(t.hp, t.tensors, r), model::ModelError);
}

TEST(Placement, BudgetKeepsLayersAnOverridePutsOnTheDevice) {
  const Table t = clover35b_q4_0();
  PlacementRequest r = request(10 * GiB, 16384);
  r.overrides = {parse_tensor_override(R"(blk\.0\.ffn_up_exps=vulkan)")};
  const Placement p = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(p.n_host_experts(0), 0);
  EXPECT_EQ(p.n_host_experts(1), t.hp.n_expert);
  EXPECT_LE(p.device_total(), 10 * GiB);
}

// -ngl N below the layer count: the first layers' weights, KV cache and state are in RAM, not on
// the device; a budget places the device layers' experts only; -ot cannot put a CPU layer's
// tensor on the device.
TEST(Placement, LayerSplitKeepsTheCpuLayersInRam) {
  const Table t = clover35b_q4_0();
  const int L = t.hp.n_layer;
  PlacementRequest r = request(0, 16384);
  const Placement all = plan_placement(t.hp, t.tensors, r);
  r.cpu_layers = 10;  // -ngl 30
  const Placement p = plan_placement(t.hp, t.tensors, r);
  SCOPED_TRACE(p.describe());
  EXPECT_EQ(p.cpu_layers, 10);
  EXPECT_EQ(p.n_host_layers(), 0);
  EXPECT_EQ(p.expert_weights, all.expert_weights / L * (L - 10));
  // What left the device is in RAM, byte for byte (no BF16 here: file bytes are device bytes).
  EXPECT_EQ(p.dense_weights + p.expert_weights + p.host_weights, all.dense_weights + all.expert_weights + all.host_weights);
  EXPECT_EQ(p.kv + p.recurrent + p.host_caches, all.kv + all.recurrent);
  EXPECT_LT(p.kv, all.kv);          // layers 3 and 7 are attention layers
  EXPECT_LT(p.recurrent, all.recurrent);
  EXPECT_EQ(p.compute, all.compute);
  EXPECT_NE(p.describe().find("layers 0-9 on the CPU"), std::string::npos);
  // A budget moves the device layers' experts to RAM, starting at the first device layer.
  r.budget = 10 * GiB;
  const Placement b = plan_placement(t.hp, t.tensors, r);
  EXPECT_LE(b.device_total(), 10 * GiB);
  EXPECT_GT(b.n_host_layers(), 0);
  for (int il = 0; il < 10; ++il) EXPECT_EQ(b.n_host_experts(il), 0) << il;
  EXPECT_EQ(b.n_host_experts(10), t.hp.n_expert);
  // --n-cpu-moe counts from layer 0, as llama.cpp: only the device's layers among them change.
  r.budget = 0;
  r.n_cpu_moe = 12;
  const Placement n = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(n.n_host_layers(), 2);
  EXPECT_EQ(n.n_host_experts(10) + n.n_host_experts(11), 2 * t.hp.n_expert);
  for (int il = 0; il < 10; ++il) EXPECT_EQ(n.n_host_experts(il), 0) << il;
  // -ot putting a CPU layer's tensor on the device is refused; =cpu there is what happens anyway.
  r.n_cpu_moe = 0;
  r.overrides = {parse_tensor_override(R"(blk\.3\.ffn_up_exps=vulkan)")};
  EXPECT_THROW(plan_placement(t.hp, t.tensors, r), model::ModelError);
  r.overrides = {parse_tensor_override(R"(blk\.3\.ffn_up_exps\.5$=vulkan)")};  // one expert of a CPU layer
  EXPECT_THROW(plan_placement(t.hp, t.tensors, r), model::ModelError);
  r.overrides = {parse_tensor_override(R"(blk\.3\.ffn_up_exps\.5$=cpu)")};
  EXPECT_EQ(plan_placement(t.hp, t.tensors, r).n_host_experts(3), 0);
  r.overrides = {parse_tensor_override(R"(blk\.3\.attn_q=cpu)")};
  EXPECT_NO_THROW(plan_placement(t.hp, t.tensors, r));
  r.overrides.clear();
  r.cpu_layers = L;  // no layer left on the device
  EXPECT_THROW(plan_placement(t.hp, t.tensors, r), model::ModelError);
}

// The boundary layer of a budget: the whole layers that fit, then as many of the next layer's
// experts as still fit (0..n-1 on the device); a budget between the all-in-RAM total and one
// expert more keeps every expert in RAM; one byte less is refused.
TEST(Placement, BudgetSplitsTheBoundaryLayerPerExpert) {
  const Table t = table_of(synth::preset("tiny"));
  const int L = t.hp.n_layer, NE = t.hp.n_expert;
  const Placement all = plan_placement(t.hp, t.tensors, request(0, 256));
  const uint64_t each = all.expert_bytes;
  ASSERT_EQ(each * NE, all.expert_bytes_per_layer);
  // 1.5 layers' experts too many: layer 0 whole, the upper half of layer 1 in RAM.
  Placement p = plan_placement(t.hp, t.tensors, request(all.device_total() - each * NE * 3 / 2, 256));
  EXPECT_EQ(layers_on_host(p), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(host_experts(p, 1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(p.n_split_layers(), 1);
  EXPECT_EQ(p.device_total(), all.device_total() - each * NE * 3 / 2);
  EXPECT_EQ(p.expert_weights, all.expert_weights - 12 * each);
  EXPECT_NE(p.describe().find("experts of layer 0 in RAM, and 4 of layer 1's 8 (experts 4-7) (1 of 4 layers whole, 12 of 32 experts)"),
            std::string::npos) << p.describe();
  // Half an expert less than all: one expert in RAM, the last of layer 0.
  p = plan_placement(t.hp, t.tensors, request(all.device_total() - each / 2, 256));
  EXPECT_EQ(host_experts(p, 0), (std::vector<int>{7}));
  EXPECT_EQ(p.n_host_layers(), 0);
  EXPECT_NE(p.describe().find("1 of layer 0's 8 (expert 7) in RAM (1 of 32 experts)"), std::string::npos) << p.describe();
  // Every budget from the least that fits up: the device total fits and one more expert would not.
  PlacementRequest r = request(0, 256);
  r.cpu_moe = true;
  const Placement host = plan_placement(t.hp, t.tensors, r);
  for (uint64_t b = host.device_total(); b <= all.device_total(); b += each / 3) {
    const Placement q = plan_placement(t.hp, t.tensors, request(b, 256));
    EXPECT_LE(q.device_total(), b);
    if (q.any_on_host()) {
      EXPECT_GT(q.device_total() + each, b);
    }
  }
  EXPECT_EQ(plan_placement(t.hp, t.tensors, request(host.device_total() + each - 1, 256)).n_host_layers(), L);
  EXPECT_THROW(plan_placement(t.hp, t.tensors, request(host.device_total() - 1, 256)), model::ModelError);
  // Experts an override keeps on the device stay there; the budget moves the rest.
  r = request(all.device_total() - each * NE * 3 / 2, 256);
  r.overrides = {parse_tensor_override(R"(blk\.0\.ffn_up_exps\.(1|2)$=vulkan)")};
  p = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(host_experts(p, 0), (std::vector<int>{0, 3, 4, 5, 6, 7}));
  EXPECT_EQ(host_experts(p, 1), (std::vector<int>{2, 3, 4, 5, 6, 7}));
  EXPECT_LE(p.device_total(), r.budget);
  // The refusal names what the experts an override keeps on the device take.
  r.budget = host.device_total();
  try {
    plan_placement(t.hp, t.tensors, r);
    FAIL() << "two experts forced onto the device do not fit";
  } catch (const model::ModelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("every expert not forced onto the device by -ot in RAM"), std::string::npos) << m;
    EXPECT_NE(m.find(fmt::format("Would fit: --vram-budget {}M", (host.device_total() + 2 * each + (1 << 20) - 1) >> 20)),
              std::string::npos) << m;
  }
}

// --stream-experts: staging for kStreamedExperts experts on the device once any expert is in RAM,
// counted against the budget.
TEST(Placement, StreamingStagingCountsOnceExpertsAreInRam) {
  const Table t = clover35b_q4_0();
  PlacementRequest r = request(0, 16384);
  r.stream_experts = 32;
  EXPECT_EQ(plan_placement(t.hp, t.tensors, r).stream, 0u);  // every expert on the device
  r.budget = 12 * GiB;
  const Placement p = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(p.stream, kStreamedExperts * p.expert_bytes);
  EXPECT_LE(p.device_total(), 12 * GiB);
  EXPECT_GT(p.device_total() + p.expert_bytes, 12 * GiB);
  EXPECT_NE(p.describe().find("expert streaming"), std::string::npos) << p.describe();
  r.stream_experts = 0;
  const Placement q = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(q.stream, 0u);
  EXPECT_EQ(q.expert_weights, p.expert_weights + 16 * p.expert_bytes);  // the staging's worth of experts more
}

// -ot per expert: a pattern found in the virtual name blk.N.ffn_up_exps.E moves expert E of layer N
// (its gate, up and down); the last match wins per expert; a pattern that matches nothing is
// refused, naming the names to use.
TEST(Placement, OverridesPlaceSingleExperts) {
  const Table t = table_of(synth::preset("tiny"));
  const Placement all = plan_placement(t.hp, t.tensors, request(0, 256));
  PlacementRequest r = request(0, 256);
  r.overrides = {parse_tensor_override(R"(blk\.3\.ffn_up_exps\.(0|3|5)$=cpu)")};
  Placement p = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(host_experts(p, 3), (std::vector<int>{0, 3, 5}));
  EXPECT_EQ(p.n_host_layers(), 0);
  EXPECT_EQ(p.n_split_layers(), 1);
  EXPECT_EQ(p.expert_weights, all.expert_weights - 3 * all.expert_bytes);
  EXPECT_EQ(p.host_weights, all.host_weights + 3 * all.expert_bytes);  // F32: as stored
  EXPECT_NE(p.describe().find("3 of layer 3's 8 (experts 0, 3, 5) in RAM (3 of 32 experts)"), std::string::npos) << p.describe();
  // --cpu-moe, then experts 0-3 of layer 0 back on the device (the last match wins).
  r.cpu_moe = true;
  r.overrides = {parse_tensor_override(R"(blk\.0\.ffn_down_exps\.[0-3]$=vulkan)")};
  p = plan_placement(t.hp, t.tensors, r);
  EXPECT_EQ(host_experts(p, 0), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(p.n_host_layers(), 3);
  r.overrides.push_back(parse_tensor_override(R"(blk\.0\.ffn_gate_exps=cpu)"));
  EXPECT_EQ(plan_placement(t.hp, t.tensors, r).n_host_layers(), 4);
  // A pattern without `$` also finds expert 1's name in expert 10's: here there are only 8.
  r.cpu_moe = false;
  r.overrides = {parse_tensor_override(R"(exps\.1=cpu)")};
  p = plan_placement(t.hp, t.tensors, r);
  for (int il = 0; il < t.hp.n_layer; ++il) EXPECT_EQ(host_experts(p, il), (std::vector<int>{1}));
  // Nothing matched: an expert past the last, a layer past the last, a typo.
  for (const char* bad : {R"(blk\.0\.ffn_up_exps\.8$=cpu)", R"(blk\.4\.ffn_up_exps=cpu)", R"(ffn_up_exp\.=cpu)"}) {
    r.overrides = {parse_tensor_override(bad)};
    try {
      plan_placement(t.hp, t.tensors, r);
      ADD_FAILURE() << bad << " matches nothing";
    } catch (const model::ModelError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("matches no tensor of this model"), std::string::npos) << m;
      EXPECT_NE(m.find("4 layers of 8 experts"), std::string::npos) << m;
    }
  }
}

TEST(Placement, ParsesSizesAndOverrides) {
  EXPECT_EQ(parse_size("16G"), 16 * GiB);
  EXPECT_EQ(parse_size("8GiB"), 8 * GiB);
  EXPECT_EQ(parse_size("12gb"), 12 * GiB);
  EXPECT_EQ(parse_size("1536M"), 1536ull << 20);
  EXPECT_EQ(parse_size("1.5G"), 3 * GiB / 2);
  EXPECT_EQ(parse_size("4096"), 4096u);
  for (const char* bad : {"", "G", "-1G", "12X", "abc", "0"}) EXPECT_THROW(parse_size(bad), model::ModelError) << bad;
  EXPECT_EQ(parse_tensor_override("exps=CPU").place, Place::Host);
  EXPECT_EQ(parse_tensor_override("exps=vulkan:0").place, Place::Device);
  for (const char* bad : {"exps", "=cpu", "exps=", "exps=tpu", "([=cpu"}) EXPECT_THROW(parse_tensor_override(bad), model::ModelError) << bad;
}

}  // namespace
}  // namespace clover::backend
