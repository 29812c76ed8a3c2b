// attention.comp against kernels::attention_ref: GQA, causal and denoising-block masks, f32 /
// f16 / q8_0 caches (also mixed K and V types), head dims not a multiple of the 64 invocations.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/vulkan/ops.h"
#include "backend/vulkan/vk_test_util.h"
#include "kernels/attention.h"
#include "kernels/convert.h"

namespace clover::vulkan::test {
namespace {

using AttentionTest = VulkanTest;

struct AttnCase {
  int hd, nh, nkv, tokens, n_past;
  bool causal;
  DType kt, vt;
};

// A cache of n positions x nkv heads x hd values, rounded as the CPU stores K and V
// (model/attention.cpp: q8_0 through the activation quantiser).
std::vector<uint8_t> make_cache(DType t, int n, int nkv, int hd, uint32_t seed, size_t& stride) {
  stride = dtype_row_bytes(t, static_cast<int64_t>(nkv) * hd);
  std::vector<uint8_t> c(stride * n + 4, 0);
  const std::vector<float> v = random_floats(static_cast<size_t>(n) * nkv * hd, seed);
  for (int j = 0; j < n; ++j) {
    const float* src = v.data() + static_cast<size_t>(j) * nkv * hd;
    if (t == DType::Q8_0)
      kernels::quantize_row_q8_0_activation(src, reinterpret_cast<BlockQ8_0*>(c.data() + j * stride), nkv * hd);
    else
      kernels::quantize_row(t, src, c.data() + j * stride, nkv * hd);
  }
  return c;
}

// split_ctx > 0: split-K for a cache of that many positions; `out` receives the output.
double run_case(Device& dev, const AttnCase& c, uint32_t seed, int64_t split_ctx = 0, std::vector<float>* out = nullptr) {
  const int n = c.n_past + c.tokens;
  size_t ks = 0, vs = 0;
  const std::vector<uint8_t> kc = make_cache(c.kt, n, c.nkv, c.hd, seed, ks), vc = make_cache(c.vt, n, c.nkv, c.hd, seed + 1, vs);
  // Queries inside a wider row (query | gate per head, as the fused projection lays them out).
  const int q_head = 2 * c.hd, q_row = c.nh * q_head;
  const std::vector<float> q = random_floats(static_cast<size_t>(c.tokens) * q_row, seed + 2, -2.0f, 2.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));

  std::vector<float> ref(static_cast<size_t>(c.tokens) * c.nh * c.hd);
  const size_t k_head = dtype_row_bytes(c.kt, c.hd), v_head = dtype_row_bytes(c.vt, c.hd);
  for (int t = 0; t < c.tokens; ++t)
    for (int h = 0; h < c.nh; ++h) {
      const int g = h / (c.nh / c.nkv);
      const kernels::KvHeadRef K{c.kt, kc.data() + g * k_head, ks}, V{c.vt, vc.data() + g * v_head, vs};
      const float* qp = &q[static_cast<size_t>(t) * q_row + h * q_head];
      float* op = &ref[(static_cast<size_t>(t) * c.nh + h) * c.hd];
      const int64_t keys = c.causal ? c.n_past + t + 1 : n;
      kernels::attention_ref({&qp, &op, &keys, 1}, c.hd, scale, K, V);
    }

  Buffer qb = to_device(dev, q), kb = to_device(dev, kc.data(), kc.size()), vb = to_device(dev, vc.data(), vc.size());
  Buffer ob = dev.create_buffer(ref.size() * 4, MemoryPurpose::Scratch);
  AttentionShape s{c.hd, c.nh, c.nkv, c.tokens, c.causal, q_row, q_head, static_cast<int64_t>(c.nh) * c.hd};
  // n_past is read from a buffer when the list runs (here word 1 of 2).
  Buffer np = to_device(dev, std::vector<uint32_t>{12345u, static_cast<uint32_t>(c.n_past)});
  Buffer part = dev.create_buffer(static_cast<uint64_t>(attention_split_floats(c.nh, c.hd)) * 4, MemoryPurpose::Scratch);
  const AttentionSplit split{whole(part), split_ctx};
  CommandList cl(dev);
  cl.begin();
  record_attention(cl, dev, s, scale, whole(qb), {c.kt, whole(kb), ks, k_head}, {c.vt, whole(vb), vs, v_head}, whole(ob),
                   {whole(np), 1}, split_ctx > 0 ? &split : nullptr);
  cl.end();
  cl.run();
  const std::vector<float> o = from_device<float>(dev, ob, ref.size());
  if (out) *out = o;
  return nmse(o.data(), ref.data(), ref.size());
}

TEST_F(AttentionTest, MatchesTheReferenceOnEveryCacheType) {
  // Key counts across several 64-key tiles, a tile boundary inside the block, GQA 2:1 and 3:1.
  const AttnCase cases[] = {
      {64, 4, 2, 5, 70, true, DType::F32, DType::F32},   {96, 6, 2, 9, 130, false, DType::F32, DType::F32},
      {64, 4, 2, 5, 70, true, DType::F16, DType::F16},   {96, 6, 2, 9, 130, false, DType::F16, DType::F16},
      {64, 4, 2, 5, 70, true, DType::Q8_0, DType::Q8_0}, {96, 6, 2, 9, 130, false, DType::Q8_0, DType::Q8_0},
      {256, 2, 1, 3, 61, true, DType::F16, DType::Q8_0}, {40, 2, 2, 4, 0, true, DType::F32, DType::F16},
  };
  uint32_t seed = 100;
  for (const AttnCase& c : cases) {
    const double e = run_case(dev(), c, seed += 7);
    const bool quant = c.kt == DType::Q8_0 || c.vt == DType::Q8_0;
    EXPECT_LE(e, quant ? 5e-4 : 1e-7) << "hd " << c.hd << " K " << dtype_name(c.kt) << " V " << dtype_name(c.vt)
                                      << (c.causal ? " causal" : " block");
    std::printf("attention hd=%d %s/%s %s n_past=%d: NMSE %.3g\n", c.hd, std::string(dtype_name(c.kt)).c_str(),
                std::string(dtype_name(c.vt)).c_str(), c.causal ? "causal" : "block", c.n_past, e);
  }
}

// Split-K (flash-decoding): keys in chunks of absolute positions, one workgroup per chunk, merged
// in order. Against the CPU reference across several chunks (chunks of 256 for 1,000 positions,
// of 320 for 20,000), for causal steps and a 70-token block (two groups of query tokens); and a
// token whose keys all lie in the first chunk gets bitwise the single pass.
TEST_F(AttentionTest, SplitKMatchesTheReferenceAndTheSinglePass) {
  EXPECT_EQ(attention_split_chunk(1000), 256);
  EXPECT_EQ(attention_split_chunk(20000), 320);
  EXPECT_EQ(attention_split_chunk(131072), 2048);
  struct SplitCase {
    AttnCase c;
    int64_t n_ctx;
  };
  const SplitCase cases[] = {
      {{64, 4, 2, 5, 700, true, DType::F32, DType::F32}, 1000},    {{64, 4, 2, 5, 700, true, DType::F16, DType::F16}, 20000},
      {{64, 4, 2, 5, 700, true, DType::Q8_0, DType::Q8_0}, 1000},  {{96, 6, 2, 70, 600, false, DType::F32, DType::F32}, 2000},
      {{256, 2, 1, 3, 300, true, DType::F16, DType::Q8_0}, 1000},
  };
  uint32_t seed = 300;
  for (const SplitCase& sc : cases) {
    const AttnCase& c = sc.c;
    const double e = run_case(dev(), c, seed += 7, sc.n_ctx);
    const bool quant = c.kt == DType::Q8_0 || c.vt == DType::Q8_0;
    EXPECT_LE(e, quant ? 5e-4 : 1e-7) << "hd " << c.hd << " n_ctx " << sc.n_ctx << " tokens " << c.tokens;
    std::printf("split-K attention hd=%d %s %d tokens after %d, n_ctx %lld: NMSE %.3g\n", c.hd,
                std::string(dtype_name(c.kt)).c_str(), c.tokens, c.n_past, static_cast<long long>(sc.n_ctx), e);
  }
  for (const AttnCase& c : {AttnCase{64, 4, 2, 9, 100, true, DType::F16, DType::F16},
                            AttnCase{96, 6, 2, 70, 150, false, DType::Q8_0, DType::F32}}) {
    std::vector<float> single, split;
    run_case(dev(), c, 400, 0, &single);
    run_case(dev(), c, 400, 4096, &split);
    EXPECT_EQ(single, split) << "tokens " << c.tokens;
  }
}

TEST_F(AttentionTest, BadShapesAreRefused) {
  Buffer b = dev().create_buffer(4096, MemoryPurpose::Scratch);
  CommandList cl(dev());
  cl.begin();
  const DeviceWord np{whole(b), 0};
  AttentionShape s{48, 4, 3, 1, true, 192, 48, 192};  // 4 heads over 3 KV heads
  EXPECT_THROW(record_attention(cl, dev(), s, 1.0f, whole(b), {DType::F16, whole(b), 96, 96}, {DType::F16, whole(b), 96, 96}, whole(b), np),
               VulkanError);
  s.n_head_kv = 2;  // q8_0 with head_dim 48
  EXPECT_THROW(record_attention(cl, dev(), s, 1.0f, whole(b), {DType::Q8_0, whole(b), 96, 48}, {DType::F16, whole(b), 96, 96}, whole(b), np),
               VulkanError);
  EXPECT_THROW(record_attention(cl, dev(), s, 1.0f, whole(b), {DType::Q4_0, whole(b), 96, 48}, {DType::F16, whole(b), 96, 96}, whole(b), np),
               VulkanError);
  s.head_dim = 64;  // n_past past the end of its binding
  EXPECT_THROW(record_attention(cl, dev(), s, 1.0f, whole(b), {DType::F16, whole(b), 128, 128}, {DType::F16, whole(b), 128, 128},
                                whole(b), {whole(b), 1024}),
               VulkanError);
  cl.end();
}

}  // namespace
}  // namespace clover::vulkan::test
