// The CPU sequence: snapshots restore the state bitwise, truncation is refused where a recurrent
// state cannot rewind; its KV cache types: sizes by formula equal what is allocated, the cache types a
// model cannot take are refused with the reason, and with f16 and q8_0 caches the forward pass is
// still batch-invariant (prefill in one pass = in chunks = token by token, bitwise) and close to
// the f32 cache.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "cpu_runner.h"
#include "../../model/model_test_util.h"

namespace clover {
namespace {

using testing::TempDir;

// Token ids below 500, reproducible from `seed`.
std::vector<int32_t> random_tokens(int n, uint32_t seed) { return testing::random_tokens(n, 500, seed); }

TEST(CpuSequence, SizesByFormulaMatchTheAllocation) {
  TempDir d;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", synth::preset("tiny")));
  const model::HParams& hp = m->hp();
  for (DType k : {DType::F32, DType::F16, DType::Q8_0})
    for (DType v : {DType::F32, DType::F16, DType::Q8_0}) {
      testing::CpuSequence s(hp, 1000, {k, v});
      EXPECT_EQ(s.kv_bytes(), backend::kv_bytes_for(hp, 1000, {k, v}));
      EXPECT_EQ(s.recurrent_bytes(), backend::recurrent_bytes_for(hp));
    }
  // tiny: 1 attention layer, 2 KV heads x 64; f16 K + q8_0 V per position: 2 x (128 + 68) bytes.
  EXPECT_EQ(backend::kv_bytes_for(hp, 1000, {DType::F16, DType::Q8_0}), 1000u * 2 * (128 + 68));
}

TEST(CpuSequence, RefusesCacheTypesTheModelCannotTake) {
  TempDir d;
  synth::SynthConfig c = synth::preset("tiny");
  c.head_dim = 48;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", c));
  try {
    testing::CpuSequence s(m->hp(), 16, {DType::F16, DType::Q8_0});
    FAIL() << "q8_0 accepted for head dim 48";
  } catch (const model::ModelError& e) {
    EXPECT_STREQ(e.what(), "V cache type Q8_0 needs a head dimension that is a multiple of 32 (this model: 48)");
  }
  EXPECT_THROW(testing::CpuSequence(m->hp(), 16, {DType::Q4_0, DType::F16}), model::ModelError);
  EXPECT_NO_THROW(testing::CpuSequence(m->hp(), 16, {DType::F16, DType::F16}));
}

// save / restore: after a detour the sequence is back, bitwise, at the snapshot's length and state;
// a snapshot is reused by saving into it again; truncate works only without recurrent layers.
TEST(CpuSequence, SnapshotsRestoreTheStateBitwiseAndTruncationNeedsNoRecurrentLayers) {
  TempDir d;
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", synth::preset("tiny")));
  const model::HParams& hp = m->hp();
  testing::CpuRunner f(*m, 2, 64);
  testing::CpuSequence s(hp, 128), ref(hp, 128);
  const auto a = random_tokens(20, 1), b = random_tokens(9, 2), c = random_tokens(5, 3);
  f.causal(s, a, backend::LogitRows::None, nullptr);
  f.causal(ref, a, backend::LogitRows::None, nullptr);
  auto snap = s.new_snapshot();
  s.save(*snap);
  EXPECT_EQ(snap->n_past(), 20);
  EXPECT_EQ(snap->bytes(), backend::recurrent_bytes_for(hp));
  f.causal(s, b, backend::LogitRows::None, nullptr);  // a detour
  s.restore(*snap);
  EXPECT_EQ(s.n_past(), 20);
  EXPECT_EQ(s.committed_state(), ref.committed_state());
  // Both go on the same way: same logits, same state.
  std::vector<float> la(hp.n_vocab), lb(hp.n_vocab);
  f.causal(s, c, backend::LogitRows::Last, la.data());
  f.causal(ref, c, backend::LogitRows::Last, lb.data());
  EXPECT_EQ(la, lb);
  EXPECT_EQ(s.committed_state(), ref.committed_state());
  s.save(*snap);  // reused
  EXPECT_EQ(snap->n_past(), 25);

  EXPECT_THROW(s.truncate(10), model::ModelError) << "tiny has GDN layers: their state cannot be rewound";
  EXPECT_NO_THROW(s.truncate(25));
  EXPECT_THROW(s.truncate(26), model::ModelError);

  synth::SynthConfig attn_only = synth::preset("tiny");
  attn_only.layer_pattern = "FFFF";
  attn_only.layout = model::Layout::Qwen35Moe;  // no GDN layers, so no reverse path either
  auto ma = model::Model::load(testing::write_synth(d, "attn.gguf", attn_only));
  testing::CpuRunner fa(*ma, 2, 64);
  testing::CpuSequence t(ma->hp(), 64), u(ma->hp(), 64);
  fa.causal(t, a, backend::LogitRows::None, nullptr);
  fa.causal(u, std::span<const int32_t>(a).first(12), backend::LogitRows::None, nullptr);
  t.truncate(12);
  EXPECT_EQ(t.n_past(), 12);
  EXPECT_EQ(t.committed_state(), u.committed_state());
}

class CpuSequenceByCacheType : public ::testing::TestWithParam<DType> {};

TEST_P(CpuSequenceByCacheType, ChunkedPrefillAndDecodeAreBitwiseAndCloseToF32) {
  TempDir d;
  synth::SynthConfig c = synth::preset("tiny");
  c.type = DType::F32;  // weights exact, so what moves the logits is the cache's rounding alone
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", c));
  const int V = m->hp().n_vocab;
  const backend::KvTypes types{GetParam(), GetParam()};
  const auto toks = random_tokens(150, 4);  // > 2 key tiles
  testing::CpuRunner whole(*m, 2, 256), small(*m, 2, 7);
  testing::CpuSequence s1(m->hp(), 200, types), s2(m->hp(), 200, types), sf(m->hp(), 200);
  std::vector<float> all(toks.size() * V), ref(toks.size() * V);
  whole.causal(s1, toks, backend::LogitRows::All, all.data());
  whole.causal(sf, toks, backend::LogitRows::All, ref.data());
  size_t pos = 0;
  for (size_t n : {1, 64, 1, 1, 30, 53}) {
    std::vector<float> part(n * V);
    small.causal(s2, std::span<const int32_t>(toks).subspan(pos, n), backend::LogitRows::All, part.data());
    for (size_t i = 0; i < n * V; ++i) ASSERT_EQ(part[i], all[pos * V + i]) << "position " << pos + i / V;
    pos += n;
  }
  ASSERT_EQ(pos, toks.size());
  double worst = 0;
  for (size_t i = 0; i < all.size(); ++i) worst = std::max(worst, std::fabs(double(all[i]) - ref[i]));
  std::printf("KV %s: max |dlogit| against the f32 cache %.3g\n", std::string(dtype_name(GetParam())).c_str(), worst);
  if (GetParam() == DType::F32)
    EXPECT_EQ(worst, 0.0);
  else
    EXPECT_LT(worst, GetParam() == DType::F16 ? 5e-3 : 5e-2) << "max |dlogit| vs f32 cache";  // measured 2.7e-4, 6.4e-3
}

INSTANTIATE_TEST_SUITE_P(Types, CpuSequenceByCacheType, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace clover
