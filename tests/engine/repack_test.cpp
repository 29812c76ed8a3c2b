// Q4_0, Q4_K, IQ4_XS and Q5_K weights repacked in place at load for the CPU's AVX-512 kernels
// (EngineOptions::repack, model::Model::repack; kernels/repack.h): only weights read into memory
// are rewritten, every matrix the forward pass multiplies is, the embedding is not, and the
// engine's results are the file layout's bit for bit in every decoding mode (the mapped engine is
// the reference: its logits are llama.cpp's, oracle tests). Run on a Q4_0 file and on a Q4_K_M
// one (Q4_K and Q5_K matrices beside Q6_K ones, which keep the file's layout).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "clover/clover.h"
#include "kernels/cpu_features.h"
#include "kernels/repack.h"
#include "model/model.h"
#include "runtime/thread_pool.h"
#include "../model/model_test_util.h"

namespace clover {
namespace {

class RepackTest : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    synth::SynthConfig c = synth::preset("tiny");
    c.type = DType::Q4_0;
    q4_0_path_ = testing::write_synth(*dir_, "tiny-q4_0.gguf", c);
    // Rows of whole super-blocks (as the Vulkan executor test's K-quant files), so the preset
    // writes K-quants rather than its fallbacks.
    c.mixture = "Q4_K_M";
    c.n_embd = 256, c.gdn_head_dim = 64, c.n_ff_exp = 256, c.n_ff_shexp = 256, c.n_expert = 16, c.n_expert_used = 4;
    q4_k_m_path_ = testing::write_synth(*dir_, "tiny-q4_k_m.gguf", c);
  }
  static void TearDownTestSuite() { delete dir_; }
  void SetUp() override { path_ = std::string(GetParam()) == "Q4_0" ? q4_0_path_ : q4_k_m_path_; }

  static EngineOptions options(bool mmap, bool repack) {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 256;
    o.device = "cpu";
    o.mmap = mmap;
    o.repack = repack;
    return o;
  }
  static std::vector<int32_t> generate(Engine& e, DecodeMode mode) {
    GenerateOptions go;
    go.max_tokens = 24;
    go.ignore_eos = true;
    go.mode = mode;
    go.block_size = 8;
    std::vector<int32_t> got;
    e.new_session()->generate(testing::random_tokens(12, e.info().n_vocab, 5), go, [&](const Event& ev) {
      got.insert(got.end(), ev.tokens.begin(), ev.tokens.end());
      return true;
    });
    return got;
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::string q4_0_path_, q4_k_m_path_;
  std::string path_;
};

using testing::same_bits;

TEST_P(RepackTest, ModelRepacksEveryMultipliedTileMatrixOnceAndOnlyInMemory) {
  ThreadPool pool(2);
  auto mapped = model::Model::load(path_);
  EXPECT_EQ(mapped->repack(pool).matrices, 0) << "a mapped file is never written";
  EXPECT_EQ(mapped->weights().layers[0].moe.gate.first.layout, kernels::Layout::RowMajor);

  gguf::OpenOptions fo;
  fo.mmap = false;
  auto m = model::Model::load(path_, fo);
  uint64_t last_done = 0, last_total = 0;
  const model::RepackReport r = m->repack(pool, [&](uint64_t done, uint64_t total) {
    EXPECT_GT(done, last_done);
    last_done = done, last_total = total;
  });
  EXPECT_GT(r.matrices, 0);
  EXPECT_EQ(last_done, r.bytes);
  EXPECT_EQ(last_total, r.bytes);
  EXPECT_EQ(m->repacked().bytes, r.bytes);
  // Every Q4_0 / Q4_K / IQ4_XS / Q5_K matrix of whole tiles that a pass multiplies is in its tile
  // layout; the embedding (read by rows) is not, nor is any other type.
  const model::ModelWeights& w = m->weights();
  uint64_t expect = 0;
  int count = 0;
  std::map<DType, int> by_type;
  auto check = [&](const kernels::MatRef& x, int64_t rows) {
    const bool tiled = (x.type == DType::Q4_0 || x.type == DType::Q4_K || x.type == DType::IQ4_XS ||
                        x.type == DType::Q5_K) &&
                       x.rows % kernels::kTileRows == 0;
    if (!tiled) {
      EXPECT_EQ(x.layout, kernels::Layout::RowMajor) << dtype_name(x.type);
      return;
    }
    EXPECT_EQ(x.layout, x.type == DType::Q4_0 ? kernels::Layout::Q4_0x16 : kernels::Layout::Kx16);
    expect += x.row_stride * static_cast<uint64_t>(rows);
    ++count;
    ++by_type[x.type];
  };
  for (const model::LayerWeights& L : w.layers) {
    for (const kernels::MatRef* x : {&L.attn.q, &L.attn.k, &L.attn.v, &L.attn.o, &L.gdn.qkv, &L.gdn.gate, &L.gdn.beta,
                                     &L.gdn.alpha, &L.gdn.out, &L.gdn.rev_alpha, &L.gdn.rev_beta, &L.moe.router,
                                     &L.moe.shared_gate_inp, &L.moe.shared_gate, &L.moe.shared_up, &L.moe.shared_down})
      if (x->data) check(*x, x->rows);
    for (const model::ExpertsRef* e : {&L.moe.gate, &L.moe.up, &L.moe.down})
      check(e->first, e->first.rows * m->hp().n_expert);
  }
  if (!w.tied_output) check(w.output, w.output.rows);
  EXPECT_EQ(r.matrices, count);
  EXPECT_EQ(r.bytes, expect);
  // The file holds what the test means to cover: Q4_0 matrices, or Q4_K_M's Q4_K and Q5_K ones.
  if (std::string(GetParam()) == "Q4_0") {
    EXPECT_GT(by_type[DType::Q4_0], 0);
  } else {
    EXPECT_GT(by_type[DType::Q4_K], 0);
    EXPECT_GT(by_type[DType::Q5_K], 0);
  }
  EXPECT_EQ(w.token_embd.layout, kernels::Layout::RowMajor);
  // Repacked once: a second call finds nothing left to do.
  EXPECT_EQ(m->repack(pool).matrices, 0);
  EXPECT_EQ(m->repacked().bytes, r.bytes);
}

// A repack stopped midway (a progress callback or the pool threw) leaves every matrix either
// rewritten whole, its layout set, or untouched: a second call rewrites exactly the rest. The copy
// is one read-write mapping throughout, never re-protected (gguf/reader.cpp says why).
TEST_P(RepackTest, RepackStoppedMidwayFinishesOnTheNextCall) {
  ThreadPool pool(2);
  gguf::OpenOptions fo;
  fo.mmap = false;
  const uint64_t all = model::Model::load(path_, fo)->repack(pool).matrices;
  ASSERT_GT(all, 2u);
  auto m = model::Model::load(path_, fo);
  const void* weight = m->weights().layers[0].moe.gate.first.data;
  const auto mapping = testing::mapping_of(weight);
  ASSERT_EQ(mapping.access(), "rw");
  int calls = 0;
  EXPECT_THROW(m->repack(pool, [&](uint64_t, uint64_t) {
    if (++calls == 2) throw Error("stop");
  }),
               Error);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(m->repack(pool).matrices, all - 2);
  EXPECT_EQ(m->repack(pool).matrices, 0u);
  EXPECT_EQ(testing::mapping_of(weight).range, mapping.range) << "one mapping, not split";
  EXPECT_EQ(testing::mapping_of(weight).access(), "rw");
}

TEST_P(RepackTest, RepackedEngineGivesTheFileLayoutsBitsInEveryMode) {
  if (kernels::isa_best() == kernels::Isa::Scalar) GTEST_SKIP() << "the engine repacks only for the SIMD kernels";
  if (kernels::isa_best() == kernels::Isa::Avx2 && std::string(GetParam()) != "Q4_0")
    GTEST_SKIP() << "on AVX2 the engine repacks Q4_0 only";
  auto ref = Engine::load(path_, options(true, true));  // mapped: never repacked
  auto packed = Engine::load(path_, options(false, true));
  auto plain = Engine::load(path_, options(false, false));
  EXPECT_EQ(ref->info().repacked_bytes, 0u);
  EXPECT_GT(packed->info().repacked_bytes, 0u);
  EXPECT_EQ(plain->info().repacked_bytes, 0u) << "--no-repack";

  const std::vector<int32_t> prompt = testing::random_tokens(40, ref->info().n_vocab, 7);
  const std::vector<float> want = ref->new_session()->eval(prompt, true);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(same_bits(packed->new_session()->eval(prompt, true), want)) << "prefill, every position";
  EXPECT_TRUE(same_bits(plain->new_session()->eval(prompt, true), want));
  for (DecodeMode mode : {DecodeMode::AR, DecodeMode::Diffusion, DecodeMode::Spec}) {
    SCOPED_TRACE(static_cast<int>(mode));
    const std::vector<int32_t> a = generate(*ref, mode);
    EXPECT_EQ(a.size(), 24u);
    EXPECT_EQ(generate(*packed, mode), a);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, RepackTest, ::testing::Values("Q4_0", "Q4_K_M"));

}  // namespace
}  // namespace clover
