// rms_norm.comp and rope_neox.comp against model::ops (rms_norm, l2_norm, the GDN gated norm,
// rope_neox) on random rows with odd sizes and strides; the fused forms against the ops they join.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backend/vulkan/ops.h"
#include "backend/vulkan/rope_table.h"
#include "backend/vulkan/vk_test_util.h"
#include "kernels/vecmath.h"
#include "model/ops.h"

namespace clover::vulkan::test {
namespace {

using NormRopeTest = VulkanTest;
constexpr float kEps = 1e-6f;

// Heads of `n` values inside rows of `row` floats: head h of token t at t * row + h * head.
struct Layout {
  int64_t tokens, heads, n, row, head;
  size_t size() const { return static_cast<size_t>(tokens * row); }
  int64_t at(int64_t t, int64_t h) const { return t * row + h * head; }
};

std::vector<float> run_norm(Device& dev, const Layout& L, NormMode mode, float eps, float post, const std::vector<float>& x,
                            const std::vector<float>& w, const std::vector<float>& z) {
  Buffer xb = to_device(dev, x), wb = to_device(dev, w), zb = to_device(dev, z);
  Buffer yb = to_device(dev, std::vector<float>(L.size(), 0.0f));
  CommandList cl(dev);
  cl.begin();
  record_rms_norm(cl, dev, {L.n, L.tokens, L.heads, L.row, L.head, L.row, L.head}, mode, eps, post, whole(xb), whole(wb),
                  whole(zb), whole(yb));
  cl.end();
  cl.run();
  return from_device<float>(dev, yb, L.size());
}

TEST_F(NormRopeTest, RmsNormWeightedMatchesOps) {
  // A layer norm (one head per token, n = 1000) and per-head norms inside a wider row (the q
  // heads of the fused query/gate projection: head stride 2 * head_dim).
  for (const Layout& L : {Layout{7, 1, 1000, 1000, 0}, Layout{5, 3, 72, 3 * 144, 144}}) {
    const std::vector<float> x = random_floats(L.size(), 11, -2.0f, 2.0f), w = random_floats(L.n, 12, 0.5f, 1.5f);
    const std::vector<float> y = run_norm(dev(), L, NormMode::Weighted, kEps, 1.0f, x, w, x);
    std::vector<float> ref(L.size(), 0.0f);
    for (int64_t t = 0; t < L.tokens; ++t)
      for (int64_t h = 0; h < L.heads; ++h) model::ops::rms_norm(&x[L.at(t, h)], w.data(), &ref[L.at(t, h)], L.n, kEps);
    const double e = nmse(y.data(), ref.data(), ref.size());
    EXPECT_LE(e, 1e-7) << "n " << L.n;
    std::printf("rms_norm n=%lld: NMSE %.3g\n", static_cast<long long>(L.n), e);
  }
}

TEST_F(NormRopeTest, L2NormMatchesOps) {
  const Layout L{6, 4, 128, 4 * 128, 128};
  const std::vector<float> x = random_floats(L.size(), 13);
  const float fn = static_cast<float>(L.n);
  const std::vector<float> y = run_norm(dev(), L, NormMode::Scaled, kEps / fn, 1.0f / std::sqrt(fn), x, x, x);
  std::vector<float> ref = x;
  for (int64_t t = 0; t < L.tokens; ++t)
    for (int64_t h = 0; h < L.heads; ++h) model::ops::l2_norm(&ref[L.at(t, h)], L.n, kEps);
  const double e = nmse(y.data(), ref.data(), ref.size());
  EXPECT_LE(e, 1e-7);
  std::printf("l2_norm: NMSE %.3g\n", e);
}

// The GDN output norm: o = rms(o) * w * silu(z), as model/gdn.cpp computes it.
TEST_F(NormRopeTest, GatedNormMatchesTheGdnOutputNorm) {
  const Layout L{5, 3, 96, 3 * 96, 96};
  const std::vector<float> x = random_floats(L.size(), 14), w = random_floats(L.n, 15, 0.5f, 1.5f);
  const std::vector<float> z = random_floats(L.size(), 16, -4.0f, 4.0f);
  const std::vector<float> y = run_norm(dev(), L, NormMode::Gated, kEps, 1.0f, x, w, z);
  std::vector<float> ref(L.size());
  for (int64_t t = 0; t < L.tokens; ++t)
    for (int64_t h = 0; h < L.heads; ++h) {
      float* o = &ref[L.at(t, h)];
      model::ops::rms_norm(&x[L.at(t, h)], w.data(), o, L.n, kEps);
      std::vector<float> g(z.begin() + L.at(t, h), z.begin() + L.at(t, h) + L.n);
      kernels::silu_row(g.data(), g.data(), L.n);
      for (int64_t j = 0; j < L.n; ++j) o[j] *= g[j];
    }
  const double e = nmse(y.data(), ref.data(), ref.size());
  EXPECT_LE(e, 1e-7);
  std::printf("gated rms_norm: NMSE %.3g\n", e);
}

// Positions up to 131,000 (long context: large angles), partial rotation (n_rot < head_dim),
// heads inside a wider row.
// The fused residual add and norm (rms_norm_add) against its twin, the add (elementwise.comp) and
// the norm as two dispatches: the residual stream and the normed rows bitwise equal, on rows of
// 1000 values inside a wider stride.
TEST_F(NormRopeTest, AddThenNormInOneDispatchIsBitwiseTheTwoOps) {
  const int64_t T = 5, n = 1000, row = 1037;
  const std::vector<float> x = random_floats(static_cast<size_t>(T * row), 21, -2.0f, 2.0f);
  const std::vector<float> r = random_floats(static_cast<size_t>(T * row), 22, -2.0f, 2.0f);
  const std::vector<float> w = random_floats(n, 23, 0.5f, 1.5f);
  std::vector<float> xs[2], ys[2];
  for (int fused = 0; fused < 2; ++fused) {
    Buffer xb = to_device(dev(), x), rb = to_device(dev(), r), wb = to_device(dev(), w);
    Buffer yb = to_device(dev(), std::vector<float>(x.size(), 0.0f));
    const NormShape shape{n, T, 1, row, 0, row, 0};
    CommandList cl(dev());
    cl.begin();
    if (fused) {
      record_add_rms_norm(cl, dev(), shape, kEps, whole(xb), whole(rb), whole(wb), whole(yb));
    } else {
      record_elementwise(cl, dev(), Elementwise::Add, ElementwiseShape{n, T, row, row}, whole(rb), whole(xb));
      record_rms_norm(cl, dev(), shape, NormMode::Weighted, kEps, 1.0f, whole(xb), whole(wb), whole(wb), whole(yb));
    }
    cl.end();
    cl.run();
    xs[fused] = from_device<float>(dev(), xb, x.size());
    ys[fused] = from_device<float>(dev(), yb, x.size());
  }
  EXPECT_EQ(xs[0], xs[1]);
  EXPECT_EQ(ys[0], ys[1]);
  // And against the CPU: x + r, then ops::rms_norm.
  std::vector<float> sum = x, ref(x.size(), 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < n; ++i) sum[t * row + i] += r[t * row + i];
    model::ops::rms_norm(&sum[t * row], w.data(), &ref[t * row], n, kEps);
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(xs[1][t * row + i], sum[t * row + i]) << t << " " << i;
  EXPECT_LE(nmse(ys[1].data(), ref.data(), ref.size()), 1e-7);
}

// The add, the norm and the quantisation of its output for the next products (rms_norm.comp ADD
// QUANT) against its twins, record_add_rms_norm then record_quantize: the residual stream, the
// normed rows and the quantised blocks bitwise equal, for each activation kind (Q8_K in super-
// blocks of 256), rows of 1024 inside a wider stride; one dispatch where fused, two where not
// (rows wider than kNormQuantizeMaxCols).
TEST_F(NormRopeTest, AddNormAndQuantisationInOneDispatchAreBitwiseTheSeparateOps) {
  for (const int64_t n : {int64_t{1024}, kNormQuantizeMaxCols + 256}) {
    const int64_t T = 5, row = n + 13;
    const std::vector<float> x = random_floats(static_cast<size_t>(T * row), 31, -2.0f, 2.0f);
    const std::vector<float> r = random_floats(static_cast<size_t>(T * row), 32, -2.0f, 2.0f);
    const std::vector<float> w = random_floats(n, 33, 0.5f, 1.5f);
    const NormShape shape{n, T, 1, row, 0, row, 0};
    for (const Q8Kind kind : {Q8Kind::Q8_0, Q8Kind::Q8_1, Q8Kind::Q8_K}) {
      std::vector<float> xs[2], ys[2];
      Q8Contents q8[2];
      uint32_t dispatches[2] = {};
      for (int fused = 0; fused < 2; ++fused) {
        Buffer xb = to_device(dev(), x), rb = to_device(dev(), r), wb = to_device(dev(), w);
        Buffer yb = to_device(dev(), std::vector<float>(x.size(), 0.0f));
        Q8Activations a = make_q8_activations(dev(), T, n, kind);
        CommandList cl(dev());
        cl.begin();
        if (fused) {
          record_add_rms_norm_quantize(cl, dev(), shape, kEps, whole(xb), whole(rb), whole(wb), whole(yb), &a);
        } else {
          record_add_rms_norm(cl, dev(), shape, kEps, whole(xb), whole(rb), whole(wb), whole(yb));
          record_quantize(cl, dev(), whole(yb), T, n, row, a);
        }
        cl.end();
        cl.run();
        dispatches[fused] = cl.dispatches();
        xs[fused] = from_device<float>(dev(), xb, x.size());
        ys[fused] = from_device<float>(dev(), yb, x.size());
        q8[fused] = q8_contents(dev(), a);
      }
      const std::string what = fmt::format("n {} {}", n, q8_kind_name(kind));
      EXPECT_EQ(xs[1], xs[0]) << what;
      EXPECT_EQ(ys[1], ys[0]) << what;
      EXPECT_EQ(q8[1].quants, q8[0].quants) << what;
      EXPECT_EQ(q8[1].scales, q8[0].scales) << what;
      EXPECT_EQ(dispatches[1], n <= kNormQuantizeMaxCols ? 1u : 2u) << what;
    }
  }
  // A scratch with fewer rows than the pass is refused, not overrun.
  Buffer b = to_device(dev(), std::vector<float>(5 * 1024, 1.0f));
  Q8Activations small = make_q8_activations(dev(), 2, 1024, Q8Kind::Q8_0);
  CommandList cl(dev());
  cl.begin();
  EXPECT_THROW(record_add_rms_norm_quantize(cl, dev(), NormShape{1024, 5, 1, 1024, 0, 1024, 0}, kEps, whole(b), whole(b),
                                            whole(b), whole(b), &small),
               VulkanError);
  cl.end();
}

// A norm and the quantisation of its output in one dispatch (rms_norm.comp QUANT) against the
// two: the GDN's gated norm over heads side by side (the output projection's input), a layer
// norm, heads of 256 side by side, and heads apart in their rows (not fusable: two dispatches,
// the same bits). Q8_K fuses where each head is whole super-blocks of 256 or 256 / n heads fill
// one (the GDN's heads of 128: two a workgroup; heads of 64: four); the last case's rows are no
// whole super-blocks, so it is Q8_0 and Q8_1 only.
TEST_F(NormRopeTest, NormAndQuantisationInOneDispatchAreBitwiseTheTwo) {
  struct Case {
    NormMode mode;
    int64_t tokens, heads, n, x_row, x_head, y_row, y_head;
    uint32_t dispatches, q8_k_dispatches;  // 0: not a Q8_K case
  };
  for (const Case& c : {Case{NormMode::Gated, 5, 4, 128, 4 * 128, 128, 4 * 128 + 32, 128, 1, 1},
                        Case{NormMode::Gated, 3, 8, 64, 8 * 64 + 16, 64, 8 * 64, 64, 1, 1},
                        Case{NormMode::Weighted, 3, 1, 2048, 2048 + 64, 0, 2048 + 64, 0, 1, 1},
                        Case{NormMode::Gated, 4, 2, 256, 2 * 256 + 8, 256, 2 * 256 + 16, 256, 1, 1},
                        Case{NormMode::Gated, 3, 2, 64, 3 * 64, 64, 3 * 64, 96, 2, 0}}) {
    const size_t xs = static_cast<size_t>(c.tokens * c.x_row), ys = static_cast<size_t>(c.tokens * c.y_row);
    const std::vector<float> x = random_floats(xs, 41, -2.0f, 2.0f), w = random_floats(c.n, 42, 0.5f, 1.5f);
    const std::vector<float> z = random_floats(ys, 43, -4.0f, 4.0f);
    const NormShape shape{c.n, c.tokens, c.heads, c.x_row, c.x_head, c.y_row, c.y_head};
    for (const Q8Kind kind : {Q8Kind::Q8_0, Q8Kind::Q8_1, Q8Kind::Q8_K}) {
      if (kind == Q8Kind::Q8_K && c.q8_k_dispatches == 0) continue;
      std::vector<float> out[2];
      Q8Contents q8[2];
      uint32_t dispatches[2] = {};
      for (int fused = 0; fused < 2; ++fused) {
        Buffer xb = to_device(dev(), x), wb = to_device(dev(), w), zb = to_device(dev(), z);
        Buffer yb = to_device(dev(), std::vector<float>(ys, 0.0f));
        Q8Activations a = make_q8_activations(dev(), c.tokens, c.heads * c.n, kind);
        CommandList cl(dev());
        cl.begin();
        if (fused) {
          record_rms_norm_quantize(cl, dev(), shape, c.mode, kEps, 1.0f, whole(xb), whole(wb), whole(zb), whole(yb), a);
        } else {
          record_rms_norm(cl, dev(), shape, c.mode, kEps, 1.0f, whole(xb), whole(wb), whole(zb), whole(yb));
          record_quantize(cl, dev(), whole(yb), c.tokens, c.heads * c.n, c.y_row, a);
        }
        cl.end();
        cl.run();
        dispatches[fused] = cl.dispatches();
        out[fused] = from_device<float>(dev(), yb, ys);
        q8[fused] = q8_contents(dev(), a);
      }
      const std::string what = fmt::format("{} heads of {} {}", c.heads, c.n, q8_kind_name(kind));
      EXPECT_EQ(out[1], out[0]) << what;
      EXPECT_EQ(q8[1].quants, q8[0].quants) << what;
      EXPECT_EQ(q8[1].scales, q8[0].scales) << what;
      EXPECT_EQ(dispatches[1], kind == Q8Kind::Q8_K ? c.q8_k_dispatches : c.dispatches) << what;
    }
  }
}

TEST_F(NormRopeTest, RopeNeoxMatchesOps) {
  const int64_t tokens = 6, heads = 3, hd = 80, n_rot = 64, row = heads * 2 * hd, head = 2 * hd;
  const float base = 1e7f;
  const int64_t positions[tokens] = {0, 1, 17, 4095, 32768, 131000};
  std::vector<float> x = random_floats(static_cast<size_t>(tokens * row), 17);
  std::vector<float> table;
  rope_table(positions, tokens, static_cast<int>(n_rot), base, table);
  Buffer xb = to_device(dev(), x), tb = to_device(dev(), table);
  CommandList cl(dev());
  cl.begin();
  record_rope_neox(cl, dev(), {tokens, heads, n_rot, row, head}, whole(xb), whole(tb));
  cl.end();
  cl.run();
  const std::vector<float> y = from_device<float>(dev(), xb, x.size());
  std::vector<float> ref = x;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) model::ops::rope_neox(&ref[t * row + h * head], static_cast<int>(n_rot), positions[t], base);
  const double e = nmse(y.data(), ref.data(), ref.size());
  EXPECT_LE(e, 1e-7);
  // Dims past n_rot and the gate halves of the row are untouched.
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = n_rot; d < head; ++d) EXPECT_EQ(y[t * row + h * head + d], x[t * row + h * head + d]);
  std::printf("rope_neox: NMSE %.3g\n", e);
}

// The attention's per-head norm and its rope in one dispatch (rms_norm.comp ROPE) against the two:
// the q heads read from the query halves of [query | gate] rows into rows of their own, the k
// heads in place, partial rotation (n_rot < head_dim), positions up to 131,000; bitwise equal.
TEST_F(NormRopeTest, NormAndRopeInOneDispatchAreBitwiseTheTwo) {
  const int64_t T = 4, hd = 256, n_rot = 64, heads = 3;
  const int64_t positions[T] = {0, 5, 40000, 131000};
  std::vector<float> table;
  rope_table(positions, T, static_cast<int>(n_rot), 1e7f, table);
  const std::vector<float> w = random_floats(hd, 61, 0.5f, 1.5f);
  struct Case {
    NormShape s;
    bool in_place;
  };
  for (const Case& c : {Case{NormShape{hd, T, heads, heads * 2 * hd + 8, 2 * hd, heads * hd + 4, hd}, false},
                        Case{NormShape{hd, T, heads, heads * hd + 4, hd, heads * hd + 4, hd}, true}}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(T * c.s.x_row), 62, -2.0f, 2.0f);
    std::vector<float> ys[2];
    uint32_t dispatches[2] = {};
    for (int fused = 0; fused < 2; ++fused) {
      Buffer xb = to_device(dev(), x), wb = to_device(dev(), w), tb = to_device(dev(), table);
      Buffer yb = to_device(dev(), std::vector<float>(static_cast<size_t>(T * c.s.y_row), 0.0f));
      const Buffer& out = c.in_place ? xb : yb;
      CommandList cl(dev());
      cl.begin();
      if (fused) {
        record_rms_norm_rope(cl, dev(), c.s, kEps, whole(xb), whole(wb), whole(out), n_rot, whole(tb));
      } else {
        record_rms_norm(cl, dev(), c.s, NormMode::Weighted, kEps, 1.0f, whole(xb), whole(wb), whole(wb), whole(out));
        record_rope_neox(cl, dev(), RopeShape{T, heads, n_rot, c.s.y_row, c.s.y_head}, whole(out), whole(tb));
      }
      cl.end();
      cl.run();
      dispatches[fused] = cl.dispatches();
      ys[fused] = from_device<float>(dev(), out, static_cast<size_t>(T * c.s.y_row));
    }
    EXPECT_EQ(ys[1], ys[0]) << (c.in_place ? "in place" : "into rows of their own");
    EXPECT_EQ(dispatches[1], 1u);
    EXPECT_EQ(dispatches[0], 2u);
  }
}

}  // namespace
}  // namespace clover::vulkan::test
