// A whole MoE layer on the device (router, grouping, expert products over their routed rows,
// swiglu, the sigmoid-gated shared expert, the combine) against the same layer composed of the
// CPU twins (kernels::matmul_ref, swiglu_span_ref, the routing of model/moe.cpp), for F32, F16
// and every block type of expert weights; plus swiglu.comp alone and the grouping bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backend/vulkan/moe_ops.h"
#include "backend/vulkan/moe_ref.h"
#include "kernels/vecmath.h"
#include "backend/vulkan/vk_test_util.h"
#include "kernels/convert.h"
#include "kernels/matmul.h"
#include "model/ops.h"

namespace clover::vulkan::test {
namespace {

using MoeTest = VulkanTest;

// y [n][w.rows] = W . x rows (n rows of w.cols floats), through the CPU twin.
std::vector<float> cpu_linear(const kernels::MatRef& w, const float* x, int64_t n) {
  kernels::ActRows a;
  a.convert(x, n, w.cols, w.cols, kernels::activation_type(w.type));
  std::vector<float> y(static_cast<size_t>(n * w.rows));
  kernels::matmul_ref(w, a, y.data(), w.rows, 0, w.rows);
  return y;
}

struct MoeShape {
  int E, NE, k, ff, ff_sh, T;
};

struct MoeWeightsHost {
  HostMatrix router, gate_inp, sh_gate, sh_up, sh_down;
  std::vector<HostMatrix> gate, up, down;
};

// The CPU layer, as Forward::moe_layer computes it (numbers through the scalar twins).
std::vector<float> cpu_moe(const MoeShape& s, const MoeWeightsHost& W, const std::vector<float>& h,
                           std::vector<int32_t>& ids_out, float& min_margin) {
  const std::vector<float> logits = cpu_linear(W.router.ref, h.data(), s.T);
  std::vector<int32_t> ids(static_cast<size_t>(s.T * s.k));
  std::vector<float> wts(ids.size());
  min_margin = 1.0f;
  for (int t = 0; t < s.T; ++t) {
    float m = 0;
    route_ref(&logits[static_cast<size_t>(t) * s.NE], s.NE, s.k, &ids[t * s.k], &wts[t * s.k], &m);
    min_margin = std::min(min_margin, m);
  }
  ids_out = ids;
  const std::vector<int32_t> g = group_ref(ids, s.T, s.NE, s.k);
  const int n_rows = s.T * s.k;
  std::vector<float> act(static_cast<size_t>(n_rows) * s.ff), down(static_cast<size_t>(n_rows) * s.E);
  for (int r = 0; r < n_rows; ++r) {
    int e = 0;
    while (!(r >= g[s.NE + e] && r < g[s.NE + e] + g[e])) ++e;
    const float* x = &h[static_cast<size_t>(g[2 * s.NE + r]) * s.E];
    std::vector<float> gv = cpu_linear(W.gate[e].ref, x, 1), uv = cpu_linear(W.up[e].ref, x, 1);
    kernels::swiglu_span_ref(gv.data(), uv.data(), s.ff, 0, s.ff);
    std::copy(gv.begin(), gv.end(), act.begin() + static_cast<size_t>(r) * s.ff);
    const std::vector<float> d = cpu_linear(W.down[e].ref, gv.data(), 1);
    std::copy(d.begin(), d.end(), down.begin() + static_cast<size_t>(r) * s.E);
  }
  std::vector<float> sg = cpu_linear(W.sh_gate.ref, h.data(), s.T), su = cpu_linear(W.sh_up.ref, h.data(), s.T);
  for (int t = 0; t < s.T; ++t) kernels::swiglu_span_ref(&sg[static_cast<size_t>(t) * s.ff_sh], &su[static_cast<size_t>(t) * s.ff_sh], s.ff_sh, 0, s.ff_sh);
  const std::vector<float> sd = cpu_linear(W.sh_down.ref, sg.data(), s.T);
  const std::vector<float> gamma = cpu_linear(W.gate_inp.ref, h.data(), s.T);
  std::vector<float> y(static_cast<size_t>(s.T) * s.E, 0.0f);
  for (int t = 0; t < s.T; ++t) {
    float* yt = &y[static_cast<size_t>(t) * s.E];
    for (int j = 0; j < s.k; ++j) {
      const float* d = &down[static_cast<size_t>(g[2 * s.NE + n_rows + t * s.k + j]) * s.E];
      for (int i = 0; i < s.E; ++i) yt[i] += wts[t * s.k + j] * d[i];
    }
    const float gm = model::ops::sigmoid(gamma[t]);
    for (int i = 0; i < s.E; ++i) yt[i] += gm * sd[static_cast<size_t>(t) * s.E + i];
  }
  return y;
}

// The same layer recorded into one command list and run once.
std::vector<float> gpu_moe(Device& dev, const MoeShape& s, const MoeWeightsHost& W, const std::vector<float>& h,
                           std::vector<int32_t>& groups_out) {
  const DType wt = W.gate[0].ref.type;
  const bool quant = reads_q8_activations(wt);
  const int n_rows = s.T * s.k;
  auto upload = [&](const HostMatrix& m, Buffer& b) {
    b = dev.create_buffer(device_matrix_bytes(m.ref), MemoryPurpose::Weights);
    return upload_matrix(dev, m.ref, b, 0);
  };
  auto upload_all = [&](const std::vector<HostMatrix>& ms, Buffer& b) {
    std::vector<kernels::MatRef> refs;
    for (const HostMatrix& m : ms) refs.push_back(m.ref);
    b = dev.create_buffer(device_experts_bytes(refs[0], s.NE), MemoryPurpose::Weights);
    return upload_experts(dev, refs.data(), s.NE, b, 0);
  };
  Buffer b_router, b_gate_inp, b_sg, b_su, b_sd, b_g, b_u, b_d;
  const DeviceMatrix router = upload(W.router, b_router), gate_inp = upload(W.gate_inp, b_gate_inp);
  const DeviceMatrix sg = upload(W.sh_gate, b_sg), su = upload(W.sh_up, b_su), sd = upload(W.sh_down, b_sd);
  const DeviceExperts eg = upload_all(W.gate, b_g), eu = upload_all(W.up, b_u), ed = upload_all(W.down, b_d);

  auto scratch = [&](int64_t floats) { return dev.create_buffer(floats * 4, MemoryPurpose::Scratch); };
  Buffer hb = to_device(dev, h), logits = scratch(s.T * s.NE), ids = scratch(n_rows), wts = scratch(n_rows);
  Buffer groups = scratch(moe_group_ints(s.NE, s.T, s.k));
  Buffer G = scratch(n_rows * s.ff), U = scratch(n_rows * s.ff), D = scratch(n_rows * s.E);
  Buffer GS = scratch(s.T * s.ff_sh), US = scratch(s.T * s.ff_sh), DS = scratch(s.T * s.E), gamma = scratch(s.T);
  Buffer y = scratch(s.T * s.E);
  Q8Activations qh, qg, qs;
  if (quant) {
    const Q8Kind k = activation_kind(wt);
    qh = make_q8_activations(dev, s.T, s.E, k);
    qg = make_q8_activations(dev, n_rows, s.ff, k);
    qs = make_q8_activations(dev, s.T, s.ff_sh, k);
  }
  CommandList cl(dev);
  cl.begin();
  // The router and the shared-expert gate stay F32 (as in the files); the FFNs use `wt`.
  record_matmul(cl, dev, router, whole(hb), s.E, nullptr, s.T, whole(logits), s.NE);
  record_moe_router(cl, dev, whole(logits), s.T, s.NE, s.k, s.NE, whole(ids), whole(wts));
  record_moe_group(cl, dev, whole(ids), s.T, s.NE, s.k, whole(groups));
  if (quant) record_quantize(cl, dev, whole(hb), s.T, s.E, s.E, qh);
  record_matmul_experts(cl, dev, eg, whole(hb), s.E, &qh, whole(groups), n_rows, true, whole(G), s.ff);
  record_matmul_experts(cl, dev, eu, whole(hb), s.E, &qh, whole(groups), n_rows, true, whole(U), s.ff);
  record_swiglu(cl, dev, whole(G), whole(U), n_rows, s.ff, s.ff);
  if (quant) record_quantize(cl, dev, whole(G), n_rows, s.ff, s.ff, qg);
  record_matmul_experts(cl, dev, ed, whole(G), s.ff, &qg, whole(groups), n_rows, false, whole(D), s.E);
  record_matmul(cl, dev, sg, whole(hb), s.E, &qh, s.T, whole(GS), s.ff_sh);
  record_matmul(cl, dev, su, whole(hb), s.E, &qh, s.T, whole(US), s.ff_sh);
  record_swiglu(cl, dev, whole(GS), whole(US), s.T, s.ff_sh, s.ff_sh);
  if (quant) record_quantize(cl, dev, whole(GS), s.T, s.ff_sh, s.ff_sh, qs);
  record_matmul(cl, dev, sd, whole(GS), s.ff_sh, &qs, s.T, whole(DS), s.E);
  record_matmul(cl, dev, gate_inp, whole(hb), s.E, nullptr, s.T, whole(gamma), 1);
  record_moe_combine(cl, dev, whole(D), whole(DS), whole(wts), whole(groups), whole(gamma), 1, s.T, s.NE, s.k, s.E,
                     whole(y), s.E);
  cl.end();
  cl.run();
  groups_out = from_device<int32_t>(dev, groups, moe_group_ints(s.NE, s.T, s.k));
  return from_device<float>(dev, y, static_cast<size_t>(s.T) * s.E);
}

// The K-quants and IQ4_XS need rows of whole super-blocks: a wider, shallower layer for them.
void check_moe(Device& dev, DType wt, double tolerance) {
  const MoeShape s = dtype_block_size(wt) == 256 ? MoeShape{256, 8, 2, 256, 256, 5} : MoeShape{64, 16, 4, 32, 64, 7};
  uint32_t seed = 300;
  MoeWeightsHost W;
  W.router = random_matrix(DType::F32, s.NE, s.E, seed++, 1.0f);
  W.gate_inp = random_matrix(DType::F32, 1, s.E, seed++, 0.3f);
  W.sh_gate = random_matrix(wt, s.ff_sh, s.E, seed++, 0.3f);
  W.sh_up = random_matrix(wt, s.ff_sh, s.E, seed++, 0.3f);
  W.sh_down = random_matrix(wt, s.E, s.ff_sh, seed++, 0.3f);
  for (int e = 0; e < s.NE; ++e) {
    W.gate.push_back(random_matrix(wt, s.ff, s.E, seed++, 0.3f));
    W.up.push_back(random_matrix(wt, s.ff, s.E, seed++, 0.3f));
    W.down.push_back(random_matrix(wt, s.E, s.ff, seed++, 0.3f));
  }
  const std::vector<float> h = random_floats(static_cast<size_t>(s.T) * s.E, seed++, -1.5f, 1.5f);
  std::vector<int32_t> ids, groups;
  float margin = 0;
  const std::vector<float> ref = cpu_moe(s, W, h, ids, margin);
  ASSERT_GT(margin, 1e-5f) << "the random router has a near tie: choose another seed";
  const std::vector<float> y = gpu_moe(dev, s, W, h, groups);
  EXPECT_EQ(groups, group_ref(ids, s.T, s.NE, s.k)) << "routing or grouping differs";
  const double e = nmse(y.data(), ref.data(), ref.size());
  EXPECT_LE(e, tolerance) << dtype_name(wt);
  std::printf("moe layer %s: NMSE %.3g (tolerance %.1g), groups identical\n", std::string(dtype_name(wt)).c_str(), e,
              tolerance);
}

TEST_F(MoeTest, LayerF32MatchesTheCpuComposition) { check_moe(dev(), DType::F32, 1e-7); }
TEST_F(MoeTest, LayerF16MatchesTheCpuComposition) { check_moe(dev(), DType::F16, 1e-7); }
TEST_F(MoeTest, LayerQ8_0MatchesTheCpuComposition) { check_moe(dev(), DType::Q8_0, 5e-4); }
TEST_F(MoeTest, LayerQ4_0MatchesTheCpuComposition) { check_moe(dev(), DType::Q4_0, 5e-4); }
// The activations are quantised as the CPU quantises them (Q8_K for the K-quants and IQ4_XS,
// Q8_1 for Q4_1 / Q5_1), so the Q4_0 bound holds.
TEST_F(MoeTest, LayerQ2_KMatchesTheCpuComposition) { check_moe(dev(), DType::Q2_K, 5e-4); }
TEST_F(MoeTest, LayerQ3_KMatchesTheCpuComposition) { check_moe(dev(), DType::Q3_K, 5e-4); }
TEST_F(MoeTest, LayerQ4_KMatchesTheCpuComposition) { check_moe(dev(), DType::Q4_K, 5e-4); }
TEST_F(MoeTest, LayerQ5_KMatchesTheCpuComposition) { check_moe(dev(), DType::Q5_K, 5e-4); }
TEST_F(MoeTest, LayerQ6_KMatchesTheCpuComposition) { check_moe(dev(), DType::Q6_K, 5e-4); }
TEST_F(MoeTest, LayerIQ4_XSMatchesTheCpuComposition) { check_moe(dev(), DType::IQ4_XS, 5e-4); }
TEST_F(MoeTest, LayerQ4_1MatchesTheCpuComposition) { check_moe(dev(), DType::Q4_1, 5e-4); }
TEST_F(MoeTest, LayerQ5_0MatchesTheCpuComposition) { check_moe(dev(), DType::Q5_0, 5e-4); }
TEST_F(MoeTest, LayerQ5_1MatchesTheCpuComposition) { check_moe(dev(), DType::Q5_1, 5e-4); }
TEST_F(MoeTest, LayerIQ4_NLMatchesTheCpuComposition) { check_moe(dev(), DType::IQ4_NL, 5e-4); }

// A tensor of which the device stores only some experts (the others kept in host RAM by a
// per-expert placement): stored in runs, here two experts a dispatch under a lowered binding
// limit, it computes the rows of its experts bit for bit as the tensor with every expert stored,
// and leaves the other experts' rows as they were.
TEST_F(MoeTest, StoredSubsetOfExpertsComputesOnlyItsRows) {
  const int NE = 16, T = 9, k = 4, E = 64, ff = 32;
  std::vector<HostMatrix> gate;
  std::vector<kernels::MatRef> refs;
  for (int e = 0; e < NE; ++e) gate.push_back(random_matrix(DType::F32, ff, E, 700 + e, 0.3f));
  for (const HostMatrix& m : gate) refs.push_back(m.ref);
  std::vector<int32_t> ids;  // token t's slot j: expert (t + 4 j) % 16, every expert routed to
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) ids.push_back((t + 4 * j) % NE);
  const std::vector<int32_t> groups = group_ref(ids, T, NE, k);
  std::vector<bool> skip(NE, false);
  for (int e : {0, 3, 5, 6, 15}) skip[e] = true;

  Buffer b_all = dev().create_buffer(device_experts_bytes(refs[0], NE), MemoryPurpose::Weights);
  Buffer b_part = dev().create_buffer(device_experts_bytes(refs[0], NE - 5), MemoryPurpose::Weights);
  const DeviceExperts all = upload_experts(dev(), refs.data(), NE, b_all, 0);
  const DeviceExperts part = upload_experts(dev(), refs.data(), NE, b_part, 0, skip);
  ASSERT_EQ(part.runs.size(), 3u);
  EXPECT_EQ(part.runs[0].first, 1);
  EXPECT_EQ(part.runs[0].count, 2);
  EXPECT_EQ(part.runs[0].slot, 0);
  EXPECT_EQ(part.runs[1].first, 4);
  EXPECT_EQ(part.runs[1].count, 1);
  EXPECT_EQ(part.runs[1].slot, 2);
  EXPECT_EQ(part.runs[2].first, 7);
  EXPECT_EQ(part.runs[2].count, 8);
  EXPECT_EQ(part.runs[2].slot, 3);
  EXPECT_EQ(part.n_stored(), NE - 5);
  EXPECT_EQ(part.n_expert, NE);
  std::vector<bool> none(NE, true);
  EXPECT_THROW(upload_experts(dev(), refs.data(), NE, b_part, 0, none), VulkanError);

  const std::vector<float> h = random_floats(static_cast<size_t>(T) * E, 710, -1.5f, 1.5f);
  const std::vector<float> sentinel(static_cast<size_t>(T) * k * ff, 1234.5f);
  Buffer hb = to_device(dev(), h), gb = to_device(dev(), groups);
  Buffer y_all = to_device(dev(), sentinel), y_part = to_device(dev(), sentinel);
  const uint64_t limit = dev().binding_limit();
  dev().set_binding_limit(2 * all.expert_stride + all.expert_stride / 2);
  EXPECT_EQ(matmul_experts_dispatches(dev(), part), 1 + 1 + 4);
  CommandList cl(dev());
  cl.begin();
  record_matmul_experts(cl, dev(), all, whole(hb), E, nullptr, whole(gb), T * k, true, whole(y_all), ff);
  record_matmul_experts(cl, dev(), part, whole(hb), E, nullptr, whole(gb), T * k, true, whole(y_part), ff);
  cl.end();
  cl.run();
  dev().set_binding_limit(limit);
  const std::vector<float> ya = from_device<float>(dev(), y_all, sentinel.size());
  const std::vector<float> yp = from_device<float>(dev(), y_part, sentinel.size());
  for (int e = 0; e < NE; ++e)
    for (int r = groups[NE + e]; r < groups[NE + e] + groups[e]; ++r)
      for (int o = 0; o < ff; ++o) {
        const size_t i = static_cast<size_t>(r) * ff + o;
        ASSERT_NE(ya[i], 1234.5f) << "expert " << e << " row " << r;
        ASSERT_EQ(yp[i], skip[e] ? 1234.5f : ya[i]) << "expert " << e << " row " << r << " column " << o;
      }
}

// A decode step routes one token to k of many experts: the grid has k workgroup rows per chunk,
// each taking the chunk's next active expert (moe_group's list). With the experts split into
// chunks of 3 by a lowered binding limit, the active experts fall in different chunks, some chunks
// have none; every routed row is written with its expert's product, and nothing else is.
TEST_F(MoeTest, DecodeStepLaunchesOnlyTheRoutedExpertsAcrossChunks) {
  const int NE = 16, T = 1, k = 4, E = 64, ff = 32;
  std::vector<HostMatrix> gate;
  std::vector<kernels::MatRef> refs;
  for (int e = 0; e < NE; ++e) gate.push_back(random_matrix(DType::F32, ff, E, 800 + e, 0.3f));
  for (const HostMatrix& m : gate) refs.push_back(m.ref);
  const std::vector<int32_t> ids = {13, 2, 10, 9};  // chunks [0,3) [3,6) [6,9) [9,12) [12,15) [15,16)
  const std::vector<int32_t> groups = group_ref(ids, T, NE, k);
  ASSERT_EQ(groups[moe_group_active_offset(NE, T * k)], 4);
  Buffer b_all = dev().create_buffer(device_experts_bytes(refs[0], NE), MemoryPurpose::Weights);
  const DeviceExperts all = upload_experts(dev(), refs.data(), NE, b_all, 0);
  const std::vector<float> h = random_floats(static_cast<size_t>(E), 810, -1.5f, 1.5f);
  const std::vector<float> sentinel(static_cast<size_t>(T) * k * ff, 1234.5f);
  Buffer hb = to_device(dev(), h), gb = to_device(dev(), groups), y = to_device(dev(), sentinel);
  const uint64_t limit = dev().binding_limit();
  dev().set_binding_limit(3 * all.expert_stride + all.expert_stride / 2);
  CommandList cl(dev());
  cl.begin();
  record_matmul_experts(cl, dev(), all, whole(hb), E, nullptr, whole(gb), T * k, true, whole(y), ff);
  cl.end();
  cl.run();
  dev().set_binding_limit(limit);
  EXPECT_EQ(cl.dispatches(), 6u);  // one per chunk of 3 experts, each k workgroup rows at most
  const std::vector<float> yd = from_device<float>(dev(), y, sentinel.size());
  for (int e = 0; e < NE; ++e)
    for (int r = groups[NE + e]; r < groups[NE + e] + groups[e]; ++r) {
      const std::vector<float> ref = cpu_linear(refs[e], h.data(), 1);
      for (int o = 0; o < ff; ++o)
        ASSERT_NEAR(yd[static_cast<size_t>(r) * ff + o], ref[o], 1e-4f * (1.0f + std::fabs(ref[o])))
            << "expert " << e << " row " << r << " column " << o;
    }
}

// The rows routed to one expert, in several tiles of 8: each row's product is bitwise the one the
// token gets routed alone (batch invariance), and agrees with the CPU twin. Rows of up to 64
// blocks take the path that decodes an invocation's block once for all the expert's rows; longer
// rows (and float weights) the path that reads the weights per tile: both are checked.
void check_expert_rows(Device& dev, DType wt, int64_t E) {
  const int NE = 4, T = 21, k = 2, ff = 24;
  const bool quant = reads_q8_activations(wt);
  std::vector<HostMatrix> w;
  std::vector<kernels::MatRef> refs;
  for (int e = 0; e < NE; ++e) w.push_back(random_matrix(wt, ff, E, 900 + e, 0.3f));
  for (const HostMatrix& m : w) refs.push_back(m.ref);
  Buffer b = dev.create_buffer(device_experts_bytes(refs[0], NE), MemoryPurpose::Weights);
  const DeviceExperts ex = upload_experts(dev, refs.data(), NE, b, 0);
  const std::vector<float> h = random_floats(static_cast<size_t>(T) * E, 910, -1.5f, 1.5f);
  // Every token's first slot goes to expert 2 (21 rows: tiles of 8, 8, 5), its second to t % 4
  // except 2 (expert 2 is routed once per token).
  auto route = [&](int t0, int n) {
    std::vector<int32_t> ids;
    for (int t = t0; t < t0 + n; ++t) {
      ids.push_back(2);
      ids.push_back(t % NE == 2 ? 3 : t % NE);
    }
    return ids;
  };
  auto run = [&](int t0, int n) {
    const std::vector<int32_t> groups = group_ref(route(t0, n), n, NE, k);
    Buffer hb = to_device(dev, std::vector<float>(h.begin() + t0 * E, h.begin() + (t0 + n) * E));
    Buffer gb = to_device(dev, groups);
    Buffer y = dev.create_buffer(static_cast<uint64_t>(n) * k * ff * 4, MemoryPurpose::Scratch);
    Q8Activations q8;
    if (quant) q8 = make_q8_activations(dev, n, E, activation_kind(wt));
    CommandList cl(dev);
    cl.begin();
    if (quant) record_quantize(cl, dev, whole(hb), n, E, E, q8);
    record_matmul_experts(cl, dev, ex, whole(hb), E, quant ? &q8 : nullptr, whole(gb), n * k, true, whole(y), ff);
    cl.end();
    cl.run();
    // Expert 2's rows, in token order (the grouping keeps it).
    const std::vector<float> all = from_device<float>(dev, y, static_cast<size_t>(n) * k * ff);
    return std::vector<float>(all.begin() + groups[NE + 2] * ff, all.begin() + (groups[NE + 2] + groups[2]) * ff);
  };
  const std::vector<float> together = run(0, T);
  ASSERT_EQ(together.size(), static_cast<size_t>(T) * ff);
  const std::vector<float> ref = cpu_linear(refs[2], h.data(), T);
  for (int t = 0; t < T; ++t) {
    const std::vector<float> alone = run(t, 1);
    for (int o = 0; o < ff; ++o)
      ASSERT_EQ(together[static_cast<size_t>(t) * ff + o], alone[o])
          << dtype_name(wt) << " " << E << " columns: token " << t << " output " << o;
  }
  const double e = nmse(together.data(), ref.data(), ref.size());
  EXPECT_LE(e, quant ? 5e-4 : 1e-7) << dtype_name(wt) << " " << E << " columns";
  std::printf("%s, %lld columns (%s): 21 rows on one expert bitwise each row alone, NMSE %.3g\n",
              std::string(dtype_name(wt)).c_str(), static_cast<long long>(E),
              quant && E / 32 <= 64 ? "block held for all rows" : "weights read per tile", e);
}

TEST_F(MoeTest, RowsOnOneExpertAcrossTilesAreEachTheRowAlone) {
  check_expert_rows(dev(), DType::Q4_0, 512);   // 16 blocks: held
  check_expert_rows(dev(), DType::Q4_0, 4096);  // 128 blocks: per tile
  check_expert_rows(dev(), DType::Q8_0, 2048);  // 64 blocks: held
  check_expert_rows(dev(), DType::Q4_K, 256);
  check_expert_rows(dev(), DType::Q4_K, 2304);  // 72 blocks: per tile
  check_expert_rows(dev(), DType::Q6_K, 512);
  check_expert_rows(dev(), DType::Q2_K, 256);
  check_expert_rows(dev(), DType::Q5_1, 96);    // 3 blocks in 4 lanes
  check_expert_rows(dev(), DType::F32, 300);
}

TEST_F(MoeTest, SwigluMatchesTheReference) {
  const int64_t rows = 3, n = 77, stride = 80;
  std::vector<float> g = random_floats(static_cast<size_t>(rows * stride), 61, -6.0f, 6.0f);
  const std::vector<float> u = random_floats(g.size(), 62);
  Buffer gb = to_device(dev(), g), ub = to_device(dev(), u);
  CommandList cl(dev());
  cl.begin();
  record_swiglu(cl, dev(), whole(gb), whole(ub), rows, n, stride);
  cl.end();
  cl.run();
  const std::vector<float> out = from_device<float>(dev(), gb, g.size());
  for (int64_t r = 0; r < rows; ++r) kernels::swiglu_span_ref(&g[r * stride], &u[r * stride], n, 0, n);
  const double e = nmse(out.data(), g.data(), g.size());  // padding columns are left as they were on both sides
  EXPECT_LE(e, 1e-7);
  std::printf("swiglu: NMSE %.3g\n", e);
}

// swiglu and the quantisation of its output in one dispatch (the FFN down products' input): the
// rows (the padding beyond the columns left alone), quants and scales bitwise those of the two
// dispatches, in each activation kind (Q8_K: a workgroup per super-block of 256, two a row here).
TEST_F(MoeTest, SwigluQuantizedInOneDispatchIsBitwiseTheTwo) {
  const int64_t rows = 5, cols = 512, stride = 520;
  const std::vector<float> g = random_floats(static_cast<size_t>(rows * stride), 63, -6.0f, 6.0f);
  const std::vector<float> u = random_floats(g.size(), 64);
  for (const Q8Kind kind : {Q8Kind::Q8_0, Q8Kind::Q8_1, Q8Kind::Q8_K}) {
    Buffer g1 = to_device(dev(), g), g2 = to_device(dev(), g), ub = to_device(dev(), u);
    Q8Activations a1 = make_q8_activations(dev(), rows, cols, kind), a2 = make_q8_activations(dev(), rows, cols, kind);
    CommandList cl(dev());
    cl.begin();
    record_swiglu(cl, dev(), whole(g1), whole(ub), rows, cols, stride);
    record_quantize(cl, dev(), whole(g1), rows, cols, stride, a1);
    record_swiglu_quantize(cl, dev(), whole(g2), whole(ub), rows, cols, stride, a2);
    cl.end();
    cl.run();
    EXPECT_EQ(cl.dispatches(), 3u) << q8_kind_name(kind);
    EXPECT_EQ(from_device<float>(dev(), g2, g.size()), from_device<float>(dev(), g1, g.size())) << q8_kind_name(kind);
    const size_t nq = static_cast<size_t>(rows * cols / 4), ns = static_cast<size_t>(rows * cols / 32) * (kind == Q8Kind::Q8_1 ? 2 : 1);
    EXPECT_EQ(from_device<uint32_t>(dev(), a2.quants, nq), from_device<uint32_t>(dev(), a1.quants, nq)) << q8_kind_name(kind);
    EXPECT_EQ(from_device<float>(dev(), a2.scales, ns), from_device<float>(dev(), a1.scales, ns)) << q8_kind_name(kind);
  }
  Q8Activations small = make_q8_activations(dev(), 2, cols, Q8Kind::Q8_0);
  Buffer gb = to_device(dev(), g), ub = to_device(dev(), u);
  CommandList cl(dev());
  cl.begin();
  EXPECT_THROW(record_swiglu_quantize(cl, dev(), whole(gb), whole(ub), rows, cols, stride, small), VulkanError);
  cl.end();
}

// moe_group.comp (one workgroup of 256: shared counts, a scan over the experts, ranks within
// chunks of 256 entries) against the CPU's grouping, output for output: a decode step of the
// full-size shapes, a block pass, a prefill of 2,400 entries over 512 experts (ten chunks), few
// experts with many entries each, and everything routed to two experts.
TEST_F(MoeTest, GroupingMatchesTheCpuOnEveryShape) {
  struct Case {
    int T, NE, k;
    bool skewed;
  };
  std::mt19937 rng(91);
  for (const Case& c : {Case{1, 256, 8, false}, Case{32, 256, 8, false}, Case{300, 512, 8, false}, Case{100, 5, 3, false},
                        Case{77, 256, 8, true}, Case{3, 1, 1, false}}) {
    std::vector<int32_t> ids(static_cast<size_t>(c.T * c.k));
    for (int t = 0; t < c.T; ++t) {
      // k distinct experts a token (as the router chooses), skewed: mostly the same two.
      std::vector<int32_t> all(static_cast<size_t>(c.NE));
      for (int e = 0; e < c.NE; ++e) all[e] = e;
      std::shuffle(all.begin(), all.end(), rng);
      if (c.skewed) {
        std::swap(all[0], *std::find(all.begin(), all.end(), 3));
        if (c.k > 1) std::swap(all[1], *std::find(all.begin(), all.end(), 250));
      }
      for (int j = 0; j < c.k; ++j) ids[t * c.k + j] = all[j];
    }
    Buffer ib = to_device(dev(), ids);
    const size_t n_out = static_cast<size_t>(moe_group_ints(c.NE, c.T, c.k));
    Buffer gb = to_device(dev(), std::vector<int32_t>(n_out, 12345));
    CommandList cl(dev());
    cl.begin();
    record_moe_group(cl, dev(), whole(ib), c.T, c.NE, c.k, whole(gb));
    cl.end();
    cl.run();
    EXPECT_EQ(from_device<int32_t>(dev(), gb, n_out), group_ref(ids, c.T, c.NE, c.k))
        << c.T << " tokens, " << c.NE << " experts, top-" << c.k;
  }
  Buffer b = to_device(dev(), std::vector<int32_t>(8, 0));
  CommandList cl(dev());
  cl.begin();
  EXPECT_THROW(record_moe_group(cl, dev(), whole(b), 1, 513, 8, whole(b)), VulkanError);
  cl.end();
}

// The MoE output, the residual add and the next norm (and its quantisation) in one dispatch
// (rms_norm.comp ADD COMBINE [QUANT]) against its twins: record_moe_combine into y, then
// record_add_rms_norm and record_quantize. Residual stream, normed rows and quantised blocks
// bitwise equal, for no quantisation and each kind (Q8_K's super-blocks too), over groups from
// random routing.
TEST_F(MoeTest, CombineAddAndNormInOneDispatchAreBitwiseTheSeparateOps) {
  const int64_t T = 6, NE = 16, k = 4, E = 512, row = E + 8;
  std::vector<int32_t> ids(static_cast<size_t>(T * k));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) ids[t * k + j] = static_cast<int32_t>((t * 5 + j * 3 + (t * j) % 2) % NE);
  const std::vector<float> down = random_floats(static_cast<size_t>(T * k * E), 71, -3.0f, 3.0f);
  const std::vector<float> shared = random_floats(static_cast<size_t>(T * E), 72);
  const std::vector<float> wts = random_floats(static_cast<size_t>(T * k), 73, 0.0f, 1.0f);
  const std::vector<float> gamma = random_floats(static_cast<size_t>(T * 3), 74, -3.0f, 3.0f);  // stride 3
  const std::vector<float> x = random_floats(static_cast<size_t>(T * row), 75, -2.0f, 2.0f);
  const std::vector<float> w = random_floats(E, 76, 0.5f, 1.5f);
  const NormShape shape{E, T, 1, row, 0, row, 0};
  for (int kind = -1; kind < 3; ++kind) {
    std::vector<float> xs[2], ys[2];
    Q8Contents q8[2];
    uint32_t dispatches[2] = {};
    for (int fused = 0; fused < 2; ++fused) {
      Buffer ib = to_device(dev(), ids), db = to_device(dev(), down), sb = to_device(dev(), shared);
      Buffer wtb = to_device(dev(), wts), gb = to_device(dev(), gamma), xb = to_device(dev(), x), wb = to_device(dev(), w);
      Buffer grp = dev().create_buffer(moe_group_ints(NE, T, k) * 4, MemoryPurpose::Scratch);
      Buffer yb = to_device(dev(), std::vector<float>(x.size(), 0.0f)), ytmp = to_device(dev(), std::vector<float>(x.size(), 0.0f));
      Q8Activations a = make_q8_activations(dev(), T, E, kind < 0 ? Q8Kind::Q8_0 : static_cast<Q8Kind>(kind));
      const Q8Activations* ap = kind < 0 ? nullptr : &a;
      CommandList cl(dev());
      cl.begin();
      record_moe_group(cl, dev(), whole(ib), T, NE, k, whole(grp));
      if (fused) {
        const MoeCombineInputs c{whole(db), whole(sb), whole(wtb), whole(grp), whole(gb), 3, NE, k};
        record_moe_combine_add_rms_norm(cl, dev(), c, shape, 1e-6f, whole(xb), whole(wb), whole(yb), ap);
      } else {
        record_moe_combine(cl, dev(), whole(db), whole(sb), whole(wtb), whole(grp), whole(gb), 3, T, NE, k, E, whole(ytmp),
                           row);
        record_add_rms_norm(cl, dev(), shape, 1e-6f, whole(xb), whole(ytmp), whole(wb), whole(yb));
        if (ap) record_quantize(cl, dev(), whole(yb), T, E, row, *ap);
      }
      cl.end();
      cl.run();
      dispatches[fused] = cl.dispatches();
      xs[fused] = from_device<float>(dev(), xb, x.size());
      ys[fused] = from_device<float>(dev(), yb, x.size());
      q8[fused] = q8_contents(dev(), a);
    }
    const std::string what = kind < 0 ? "no quantisation" : std::string(q8_kind_name(static_cast<Q8Kind>(kind)));
    EXPECT_EQ(xs[1], xs[0]) << what;
    EXPECT_EQ(ys[1], ys[0]) << what;
    if (kind >= 0) {  // (without, the scratch is left unwritten)
      EXPECT_EQ(q8[1].quants, q8[0].quants) << what;
      EXPECT_EQ(q8[1].scales, q8[0].scales) << what;
    }
    // The group, then one dispatch against three (two without quantisation).
    EXPECT_EQ(dispatches[1], 2u) << what;
    EXPECT_EQ(dispatches[0], kind < 0 ? 3u : 4u) << what;
    EXPECT_NE(xs[1], x) << what;
  }
}

}  // namespace
}  // namespace clover::vulkan::test
