// conv_silu.comp and gdn_step.comp against the CPU's GDN layer pieces (kernels::conv_silu_ref and
// kernels::gdn_step_ref, driven as Forward::gdn_layer drives them), state updates included.
#include <gtest/gtest.h>

#include <cmath>

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

  // Reference, as model/gdn.cpp builds the taps.
  std::vector<float> ref(static_cast<size_t>(T) * C), ref_state(state.size());
  for (int t = 0; t < T; ++t) {
    const float* taps[8];
    for (int j = 0; j < K; ++j) {
      const int src = t - (K - 1) + j;
      taps[j] = src >= 0 ? &x[static_cast<size_t>(src) * stride] : &state[static_cast<size_t>(K - 1 + src) * C];
    }
    kernels::conv_silu_ref(taps, K, w.data(), C, 0, C, &ref[static_cast<size_t>(t) * C]);
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

TEST_F(GdnTest, DeltaRuleMatchesTheReferenceOverSeveralTokens) {
  for (int d : {64, 48}) {
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

// The reverse in-block path: R from zero, tokens last to first, each output added to what o held.
TEST_F(GdnTest, ReversePathMatchesTheReference) {
  for (int d : {64, 40}) {
    const int Hk = 2, Hv = 6, T = 7, conv_stride = 2 * Hk * d + Hv * d + 5, gate_stride = Hv + 3;
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
  }
}

}  // namespace
}  // namespace clover::vulkan::test
