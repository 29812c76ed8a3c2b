// conv_silu.comp, gdn_step.comp and gdn_scan.comp against the CPU's GDN layer pieces
// (kernels::conv_silu_ref and kernels::gdn_step_ref, driven as Forward::gdn_layer drives them),
// state updates included; the chunked scan also against the step shader, and the causal split
// (ops.h record_gdn_causal) for its bitwise rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "backend/vulkan/ops.h"
#include "backend/vulkan/vk_test_util.h"
#include "kernels/gdn.h"
#include "kernels/vecmath.h"
#include "model/ops.h"

namespace clover::vulkan::test {
namespace {

using GdnTest = VulkanTest;

TEST_F(GdnTest, CausalConvMatchesTheReferenceAndAdvancesTheState) {
  const int C = 70, K = 4, T = 5, stride = 75;  // odd channels, rows wider than C
  const std::vector<float> x = random_floats(static_cast<size_t>(T) * stride, 41, -2.0f, 2.0f);
  const std::vector<float> w = random_floats(static_cast<size_t>(C) * K, 42);
  std::vector<float> state = random_floats(static_cast<size_t>(K - 1) * C, 43);

  // Reference, as model/gdn.cpp builds the taps (the CPU kernel takes the weights tap-major).
  std::vector<float> w_taps(w.size());
  kernels::conv_taps_major(w.data(), K, C, w_taps.data());
  std::vector<float> ref(static_cast<size_t>(T) * C), ref_state(state.size());
  for (int t = 0; t < T; ++t) {
    const float* taps[8];
    for (int j = 0; j < K; ++j) {
      const int src = t - (K - 1) + j;
      taps[j] = src >= 0 ? &x[static_cast<size_t>(src) * stride] : &state[static_cast<size_t>(K - 1 + src) * C];
    }
    kernels::conv_silu_ref(taps, K, w_taps.data(), C, 0, C, &ref[static_cast<size_t>(t) * C]);
  }
  for (int j = 0; j < K - 1; ++j)
    for (int c = 0; c < C; ++c) {
      const int src = T - (K - 1) + j;
      ref_state[j * C + c] = src >= 0 ? x[static_cast<size_t>(src) * stride + c] : state[(K - 1 + src) * C + c];
    }

  Buffer xb = to_device(dev(), x), wb = to_device(dev(), w), sb = to_device(dev(), state);
  Buffer yb = dev().create_buffer(ref.size() * 4, MemoryPurpose::Scratch);
  CommandList cl(dev());
  cl.begin();
  record_conv_silu(cl, dev(), C, K, T, whole(xb), stride, whole(sb), whole(wb), whole(yb), C);
  cl.end();
  cl.run();
  const std::vector<float> y = from_device<float>(dev(), yb, ref.size());
  const std::vector<float> st = from_device<float>(dev(), sb, state.size());
  const double e = nmse(y.data(), ref.data(), ref.size());
  EXPECT_LE(e, 1e-7);
  EXPECT_EQ(st, ref_state);  // the state is a copy of inputs: exact
  std::printf("conv_silu: NMSE %.3g\n", e);
}

// The conv and the L2 norm of the q and k heads in one dispatch (conv_silu.comp L2) against the two
// dispatches: outputs and the advanced state bitwise equal, for the full-size head width (128: two
// channels an invocation), a width not a multiple of 64 (96) and one past 128 (200), one token
// and a run, normed and plain heads; a run too long for one invocation's loop budget falls back
// to the two dispatches (the same bits); channels not a multiple of d are not fused either.
TEST_F(GdnTest, ConvAndL2NormInOneDispatchAreBitwiseTheTwo) {
  struct Case {
    int64_t d, heads, norm_heads, T;
    int K;
    uint32_t dispatches;
  };
  const float eps = 1e-6f;
  for (const Case& c : {Case{128, 5, 2, 1, 4, 1}, Case{128, 5, 4, 37, 4, 1}, Case{96, 3, 2, 6, 3, 1}, Case{200, 3, 2, 9, 4, 1},
                        Case{128, 3, 2, 2500, 4, 2}}) {
    const int64_t C = c.d * c.heads, stride = C + 16;
    const std::vector<float> x = random_floats(static_cast<size_t>(c.T * stride), 51, -2.0f, 2.0f);
    const std::vector<float> w = random_floats(static_cast<size_t>(C * c.K), 52);
    const std::vector<float> state = random_floats(static_cast<size_t>((c.K - 1) * C), 53);
    std::vector<float> ys[2], sts[2];
    uint32_t dispatches[2] = {};
    for (int fused = 0; fused < 2; ++fused) {
      Buffer xb = to_device(dev(), x), wb = to_device(dev(), w), sb = to_device(dev(), state);
      Buffer yb = to_device(dev(), std::vector<float>(static_cast<size_t>(c.T * stride), 0.0f));
      CommandList cl(dev());
      cl.begin();
      if (fused) {
        record_conv_silu_l2(cl, dev(), C, c.K, c.T, whole(xb), stride, whole(sb), whole(wb), whole(yb), stride, c.d,
                            c.norm_heads, eps);
      } else {
        const float fd = static_cast<float>(c.d);
        record_conv_silu(cl, dev(), C, c.K, c.T, whole(xb), stride, whole(sb), whole(wb), whole(yb), stride);
        record_rms_norm(cl, dev(), NormShape{c.d, c.T, c.norm_heads, stride, c.d, stride, c.d}, NormMode::Scaled, eps / fd,
                        1.0f / std::sqrt(fd), whole(yb), whole(yb), whole(yb), whole(yb));
      }
      cl.end();
      cl.run();
      dispatches[fused] = cl.dispatches();
      ys[fused] = from_device<float>(dev(), yb, static_cast<size_t>(c.T * stride));
      sts[fused] = from_device<float>(dev(), sb, state.size());
    }
    const std::string what = std::to_string(c.heads) + " heads of " + std::to_string(c.d) + ", " + std::to_string(c.T) + " tokens";
    EXPECT_EQ(ys[1], ys[0]) << what;
    EXPECT_EQ(sts[1], sts[0]) << what;
    EXPECT_EQ(dispatches[1], c.dispatches) << what;
  }
}

// d 200: a row's 16 invocations hold 13 values each, the last workgroup's rows partly past d.
TEST_F(GdnTest, DeltaRuleMatchesTheReferenceOverSeveralTokens) {
  for (int d : {64, 48, 200}) {
    const int Hk = 2, Hv = 4, T = 6, conv_stride = 2 * Hk * d + Hv * d + 3, gate_stride = Hv + 1;
    std::vector<float> conv = random_floats(static_cast<size_t>(T) * conv_stride, 51);
    // q and k L2-normalised, as the layer feeds them.
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < 2 * Hk; ++h) model::ops::l2_norm(&conv[static_cast<size_t>(t) * conv_stride + h * d], d, 1e-6f);
    const std::vector<float> alpha = random_floats(static_cast<size_t>(T) * gate_stride, 52, -3.0f, 3.0f);
    const std::vector<float> beta = random_floats(static_cast<size_t>(T) * gate_stride, 53, -3.0f, 3.0f);
    std::vector<float> params = random_floats(2 * Hv, 54, 0.0f, 1.0f);
    for (int h = 0; h < Hv; ++h) params[Hv + h] = -std::exp(params[Hv + h]);  // a = -exp(A_log) < 0
    const std::vector<float> S0 = random_floats(static_cast<size_t>(Hv) * d * d, 55, -0.5f, 0.5f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));

    std::vector<float> S = S0, ref(static_cast<size_t>(T) * Hv * d);
    for (int h = 0; h < Hv; ++h) {
      const int kh = h % Hk;
      for (int t = 0; t < T; ++t) {
        const float* row = &conv[static_cast<size_t>(t) * conv_stride];
        const float g = model::ops::softplus(alpha[t * gate_stride + h] + params[h]) * params[Hv + h];
        kernels::gdn_step_ref(&S[static_cast<size_t>(h) * d * d], row + kh * d, row + (Hk + kh) * d, row + 2 * Hk * d + h * d,
                              std::exp(g), model::ops::sigmoid(beta[t * gate_stride + h]), scale, d,
                              &ref[(static_cast<size_t>(t) * Hv + h) * d]);
      }
    }

    Buffer cb = to_device(dev(), conv), ab = to_device(dev(), alpha), bb = to_device(dev(), beta), pb = to_device(dev(), params);
    Buffer sb = to_device(dev(), S0), ob = dev().create_buffer(ref.size() * 4, MemoryPurpose::Scratch);
    CommandList cl(dev());
    cl.begin();
    record_gdn_step(cl, dev(), {d, Hk, Hv, T, conv_stride, gate_stride, static_cast<int64_t>(Hv) * d}, scale, whole(cb),
                    whole(ab), whole(bb), whole(pb), whole(sb), whole(ob));
    cl.end();
    cl.run();
    const std::vector<float> o = from_device<float>(dev(), ob, ref.size());
    const std::vector<float> s_gpu = from_device<float>(dev(), sb, S.size());
    const double eo = nmse(o.data(), ref.data(), ref.size()), es = nmse(s_gpu.data(), S.data(), S.size());
    EXPECT_LE(eo, 1e-7) << "d " << d;
    EXPECT_LE(es, 1e-7) << "d " << d;
    std::printf("gdn_step d=%d: output NMSE %.3g, state NMSE %.3g\n", d, eo, es);
  }
}

// Random inputs of the delta rule for T tokens (q, k L2-normalised as the layer feeds them), and
// the CPU reference: outputs [T][Hv][d] and the state after them.
struct GdnCase {
  int d, Hk, Hv, T, conv_stride, gate_stride;
  std::vector<float> conv, alpha, beta, params, S0;
  float scale;
};

GdnCase make_gdn_case(int d, int Hk, int Hv, int T, uint32_t seed) {
  GdnCase c{d, Hk, Hv, T, 2 * Hk * d + Hv * d + 3, Hv + 1, {}, {}, {}, {}, {}, 1.0f / std::sqrt(static_cast<float>(d))};
  c.conv = random_floats(static_cast<size_t>(T) * c.conv_stride, seed);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < 2 * Hk; ++h) model::ops::l2_norm(&c.conv[static_cast<size_t>(t) * c.conv_stride + h * d], d, 1e-6f);
  c.alpha = random_floats(static_cast<size_t>(T) * c.gate_stride, seed + 1, -3.0f, 3.0f);
  c.beta = random_floats(static_cast<size_t>(T) * c.gate_stride, seed + 2, -3.0f, 3.0f);
  c.params = random_floats(2 * Hv, seed + 3, 0.0f, 1.0f);
  for (int h = 0; h < Hv; ++h) c.params[Hv + h] = -std::exp(c.params[Hv + h]);  // a = -exp(A_log) < 0
  c.S0 = random_floats(static_cast<size_t>(Hv) * d * d, seed + 4, -0.5f, 0.5f);
  return c;
}

void gdn_reference(const GdnCase& c, std::vector<float>& out, std::vector<float>& S) {
  const int d = c.d, Hk = c.Hk, Hv = c.Hv;
  S = c.S0;
  out.assign(static_cast<size_t>(c.T) * Hv * d, 0.0f);
  for (int h = 0; h < Hv; ++h) {
    const int kh = h % Hk;
    for (int t = 0; t < c.T; ++t) {
      const float* row = &c.conv[static_cast<size_t>(t) * c.conv_stride];
      const float g = model::ops::softplus(c.alpha[t * c.gate_stride + h] + c.params[h]) * c.params[Hv + h];
      kernels::gdn_step_ref(&S[static_cast<size_t>(h) * d * d], row + kh * d, row + (Hk + kh) * d, row + 2 * Hk * d + h * d,
                            std::exp(g), model::ops::sigmoid(c.beta[t * c.gate_stride + h]), c.scale, d,
                            &out[(static_cast<size_t>(t) * Hv + h) * d]);
    }
  }
}

// Which shader path a run goes through.
enum class GdnPath { Step, Scan, Causal };

// Tokens [t0, t0 + n) of the case on the device through `path` (Causal: at position n_past),
// starting from `S`, which it advances; returns the outputs [n][Hv][d].
std::vector<float> gdn_on_device(Device& dev, const GdnCase& c, GdnPath path, int t0, int n, int64_t n_past,
                                 std::vector<float>& S) {
  auto rows = [&](const std::vector<float>& v, int stride) {
    return std::vector<float>(v.begin() + static_cast<size_t>(t0) * stride, v.begin() + static_cast<size_t>(t0 + n) * stride);
  };
  Buffer cb = to_device(dev, rows(c.conv, c.conv_stride)), ab = to_device(dev, rows(c.alpha, c.gate_stride));
  Buffer bb = to_device(dev, rows(c.beta, c.gate_stride)), pb = to_device(dev, c.params), sb = to_device(dev, S);
  const size_t n_out = static_cast<size_t>(n) * c.Hv * c.d;
  Buffer ob = dev.create_buffer(n_out * 4, MemoryPurpose::Scratch);
  const GdnShape shape{c.d, c.Hk, c.Hv, n, c.conv_stride, c.gate_stride, static_cast<int64_t>(c.Hv) * c.d};
  CommandList cl(dev);
  cl.begin();
  if (path == GdnPath::Step)
    record_gdn_step(cl, dev, shape, c.scale, whole(cb), whole(ab), whole(bb), whole(pb), whole(sb), whole(ob));
  else if (path == GdnPath::Scan)
    record_gdn_scan(cl, dev, shape, c.scale, whole(cb), whole(ab), whole(bb), whole(pb), whole(sb), whole(ob));
  else
    record_gdn_causal(cl, dev, shape, n_past, c.scale, whole(cb), whole(ab), whole(bb), whole(pb), whole(sb), whole(ob));
  cl.end();
  cl.run();
  S = from_device<float>(dev, sb, S.size());
  return from_device<float>(dev, ob, n_out);
}

// The chunked scan over two whole chunks and a part (150 = 64 + 64 + 22 tokens): at the full
// head dim (4 blocks of 32 value rows) and at 48 (a partial block), against the CPU reference and
// against the step shader, outputs and state.
TEST_F(GdnTest, ChunkedScanMatchesTheReferenceAndTheStepShader) {
  for (int d : {128, 48}) {
    const GdnCase c = make_gdn_case(d, 2, 4, 150, 71);
    std::vector<float> ref, S_ref;
    gdn_reference(c, ref, S_ref);
    std::vector<float> S_scan = c.S0, S_step = c.S0;
    const std::vector<float> o_scan = gdn_on_device(dev(), c, GdnPath::Scan, 0, c.T, 0, S_scan);
    const std::vector<float> o_step = gdn_on_device(dev(), c, GdnPath::Step, 0, c.T, 0, S_step);
    const double eo = nmse(o_scan.data(), ref.data(), ref.size()), es = nmse(S_scan.data(), S_ref.data(), S_ref.size());
    const double po = nmse(o_scan.data(), o_step.data(), o_step.size()), ps = nmse(S_scan.data(), S_step.data(), S_step.size());
    EXPECT_LE(eo, 1e-7) << "d " << d;
    EXPECT_LE(es, 1e-7) << "d " << d;
    EXPECT_LE(po, 1e-7) << "d " << d;
    EXPECT_LE(ps, 1e-7) << "d " << d;
    const double so = nmse(o_step.data(), ref.data(), ref.size()), ss = nmse(S_step.data(), S_ref.data(), S_ref.size());
    EXPECT_LE(so, 1e-7) << "d " << d;
    EXPECT_LE(ss, 1e-7) << "d " << d;
    std::printf("d=%d, %d tokens: gdn_scan vs CPU output NMSE %.3g, state %.3g; vs gdn_step %.3g, %.3g; gdn_step vs CPU %.3g, %.3g\n",
                d, c.T, eo, es, po, ps, so, ss);
  }
}

// Strong decay (log decays down to about -40 a token, so a chunk's cumulative decay underflows)
// and a single token: no NaN, the reference's values.
TEST_F(GdnTest, ChunkedScanHandlesStrongDecayAndShortRuns) {
  GdnCase c = make_gdn_case(40, 1, 3, 70, 81);
  for (float& a : c.alpha) a += 6.0f;
  for (int h = 0; h < c.Hv; ++h) c.params[c.Hv + h] *= 4.0f;
  std::vector<float> ref, S_ref;
  gdn_reference(c, ref, S_ref);
  std::vector<float> S = c.S0;
  const std::vector<float> o = gdn_on_device(dev(), c, GdnPath::Scan, 0, c.T, 0, S);
  for (float v : o) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LE(nmse(o.data(), ref.data(), ref.size()), 1e-7);
  EXPECT_LE(nmse(S.data(), S_ref.data(), S_ref.size()), 1e-7);
  GdnCase one = make_gdn_case(40, 1, 3, 1, 91);
  gdn_reference(one, ref, S_ref);
  S = one.S0;
  const std::vector<float> o1 = gdn_on_device(dev(), one, GdnPath::Scan, 0, 1, 0, S);
  EXPECT_LE(nmse(o1.data(), ref.data(), ref.size()), 1e-7);
  EXPECT_LE(nmse(S.data(), S_ref.data(), S_ref.size()), 1e-7);
}

// The causal split: whole chunks of 64 positions aligned to absolute positions go to the scan,
// the rest to the step; so a run cut at a multiple of 64 gives bitwise what it gives uncut, and a
// run with no whole aligned chunk is bitwise the step shader.
TEST_F(GdnTest, CausalRunsScanWholeAlignedChunksOnly) {
  auto runs = [](int64_t n_past, int64_t T) {
    const GdnRuns r = gdn_causal_runs(n_past, T);
    return std::vector<int64_t>{r.lead, r.scan, r.tail};
  };
  EXPECT_EQ(runs(0, 200), (std::vector<int64_t>{0, 192, 8}));
  EXPECT_EQ(runs(37, 150), (std::vector<int64_t>{27, 64, 59}));
  EXPECT_EQ(runs(64, 64), (std::vector<int64_t>{0, 64, 0}));
  EXPECT_EQ(runs(1, 127), (std::vector<int64_t>{63, 64, 0}));
  EXPECT_EQ(runs(1, 126), (std::vector<int64_t>{126, 0, 0}));
  EXPECT_EQ(runs(10, 40), (std::vector<int64_t>{40, 0, 0}));
  EXPECT_EQ(runs(5, 1), (std::vector<int64_t>{1, 0, 0}));

  const GdnCase c = make_gdn_case(64, 2, 4, 150, 101);
  std::vector<float> ref, S_ref;
  gdn_reference(c, ref, S_ref);
  // Positions 37..186 in one run: step 37..63, scan 64..127, step 128..186.
  std::vector<float> S_one = c.S0;
  const std::vector<float> o_one = gdn_on_device(dev(), c, GdnPath::Causal, 0, c.T, 37, S_one);
  EXPECT_LE(nmse(o_one.data(), ref.data(), ref.size()), 1e-7);
  EXPECT_LE(nmse(S_one.data(), S_ref.data(), S_ref.size()), 1e-7);
  // Cut at position 128 (token 91): the same split, bitwise the same outputs and state.
  std::vector<float> S_cut = c.S0;
  std::vector<float> o_cut = gdn_on_device(dev(), c, GdnPath::Causal, 0, 91, 37, S_cut);
  const std::vector<float> o_rest = gdn_on_device(dev(), c, GdnPath::Causal, 91, c.T - 91, 128, S_cut);
  o_cut.insert(o_cut.end(), o_rest.begin(), o_rest.end());
  EXPECT_EQ(o_cut, o_one);
  EXPECT_EQ(S_cut, S_one);
  // The same positions token by token (a decode loop): the step shader's bits, which differ from
  // the scanned run's only inside the scanned chunk.
  std::vector<float> S_tok = c.S0, o_tok;
  for (int t = 0; t < c.T; ++t) {
    const std::vector<float> o = gdn_on_device(dev(), c, GdnPath::Causal, t, 1, 37 + t, S_tok);
    o_tok.insert(o_tok.end(), o.begin(), o.end());
  }
  std::vector<float> S_step = c.S0;
  const std::vector<float> o_step = gdn_on_device(dev(), c, GdnPath::Step, 0, c.T, 0, S_step);
  EXPECT_EQ(o_tok, o_step);
  EXPECT_EQ(S_tok, S_step);
  const size_t row = static_cast<size_t>(c.Hv) * c.d;
  EXPECT_TRUE(std::equal(o_one.begin(), o_one.begin() + 27 * row, o_step.begin()));  // the lead: step bits
  EXPECT_NE(o_one, o_step);  // the scanned chunk rounds differently (it did run)
}

// The reverse in-block path: R from zero, tokens last to first, each output added to what o held.
// The 120-token block at d 128 is never split (the reverse path restarts from zero per dispatch):
// it must stay under lavapipe's loop budget (ops.cpp kCpuLoopBudget), which the shader before the
// parallel layout passed only up to ~85 tokens at d 128.
TEST_F(GdnTest, ReversePathMatchesTheReference) {
  for (const auto& [d, T] : {std::pair{64, 7}, std::pair{40, 7}, std::pair{128, 120}}) {
    const int Hk = 2, Hv = 6, conv_stride = 2 * Hk * d + Hv * d + 5, gate_stride = Hv + 3;
    std::vector<float> conv = random_floats(static_cast<size_t>(T) * conv_stride, 61);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < 2 * Hk; ++h) model::ops::l2_norm(&conv[static_cast<size_t>(t) * conv_stride + h * d], d, 1e-6f);
    const std::vector<float> alpha = random_floats(static_cast<size_t>(T) * gate_stride, 62, -3.0f, 3.0f);
    const std::vector<float> beta = random_floats(static_cast<size_t>(T) * gate_stride, 63, -3.0f, 3.0f);
    std::vector<float> params = random_floats(2 * Hv, 64, 0.0f, 1.0f);
    for (int h = 0; h < Hv; ++h) params[Hv + h] = -std::exp(params[Hv + h]);
    const std::vector<float> o0 = random_floats(static_cast<size_t>(T) * Hv * d, 65);  // the forward output
    // Garbage in the scratch: the shader must start R from zero.
    const std::vector<float> junk = random_floats(static_cast<size_t>(Hv) * d * d, 66);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));

    std::vector<float> ref = o0, R(static_cast<size_t>(d) * d);
    for (int h = 0; h < Hv; ++h) {
      const int kh = h % Hk;
      std::fill(R.begin(), R.end(), 0.0f);
      for (int t = T - 1; t >= 0; --t) {
        const float* row = &conv[static_cast<size_t>(t) * conv_stride];
        const float g = model::ops::softplus(alpha[t * gate_stride + h] + params[h]) * params[Hv + h];
        kernels::gdn_step_reverse_ref(R.data(), row + kh * d, row + (Hk + kh) * d, row + 2 * Hk * d + h * d, std::exp(g),
                                      model::ops::sigmoid(beta[t * gate_stride + h]), scale, d,
                                      &ref[(static_cast<size_t>(t) * Hv + h) * d]);
      }
    }

    Buffer cb = to_device(dev(), conv), ab = to_device(dev(), alpha), bb = to_device(dev(), beta), pb = to_device(dev(), params);
    Buffer rb = to_device(dev(), junk), ob = to_device(dev(), o0);
    CommandList cl(dev());
    cl.begin();
    record_gdn_reverse(cl, dev(), {d, Hk, Hv, T, conv_stride, gate_stride, static_cast<int64_t>(Hv) * d}, scale, whole(cb),
                       whole(ab), whole(bb), whole(pb), whole(rb), whole(ob));
    cl.end();
    cl.run();
    const std::vector<float> o = from_device<float>(dev(), ob, ref.size());
    // Compare the added part, o - o0, so the tolerance is on what the shader computed.
    std::vector<float> got(o.size()), want(o.size());
    for (size_t i = 0; i < o.size(); ++i) got[i] = o[i] - o0[i], want[i] = ref[i] - o0[i];
    const double e = nmse(got.data(), want.data(), want.size());
    EXPECT_LE(e, 1e-7) << "d " << d;
    std::printf("gdn_step_reverse d=%d: NMSE of o_rev %.3g\n", d, e);
  }  // On a CPU-type device (lavapipe) a block past the shader loop limit is refused, not cut short.
  if (dev().info().is_cpu()) {
    Buffer b = dev().create_buffer(256, MemoryPurpose::Scratch);
    CommandList cl(dev());
    cl.begin();
    EXPECT_THROW(record_gdn_reverse(cl, dev(), {128, 2, 6, 600, 2048, 8, 768}, 1.0f, whole(b), whole(b), whole(b), whole(b),
                                    whole(b), whole(b)),
                 VulkanError);
  }
}

}  // namespace
}  // namespace clover::vulkan::test
