// Passes recorded once per shape and resubmitted (backend/vulkan/executor/recorded_pass.h) against
// the plain path that records every pass anew (Options::record_every_pass): bitwise the same
// logits, selections, statistics and sequence states over one session of every kind of pass —
// prefill, a decode of many steps, stacked passes, denoising passes, snapshots, a reset, a sequence
// replaced by a new one, guess-then-verify decoding — with a cache that keeps every shape and one
// so small that it drops recordings all the time. A lowered binding limit splits the head into
// chunks of 8 rows, so a prefill's head takes several segments. Validation layer on, zero
// messages. Label `vulkan`. The cache's bookkeeping (least recently used order) is tested without
// a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/vulkan/executor/recorded_pass.h"
#include "backend/vulkan/executor_test_util.h"
#include "decode/decoders.h"
#include "model/model_test_util.h"

namespace clover {
namespace {

using backend::LogitRows;
using backend::Pass;
using testing::TempDir;

// Everything a session produced, in order.
struct Session {
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<uint8_t>> states;
  std::vector<int64_t> stats;  // tokens, expert rows, distinct experts of every pass
  std::vector<int32_t> tops;   // the selections' ids and logits' bits
  std::vector<int32_t> spec_out;
};

std::unique_ptr<vulkan::VulkanExecutor> make_executor(const model::Model& m, bool every_pass, int recorded) {
  std::string error;
  auto probe = vulkan::Instance::create({}, error);
  if (!probe || probe->devices().empty()) return nullptr;
  vulkan::VulkanExecutor::Options o;
  o.device = test_device();
  o.max_batch = 16;
  o.validate = vulkan::test::test_validation();
  o.verbose = false;
  o.record_every_pass = every_pass;
  o.recorded_passes = recorded;
  o.binding_limit = 32768;  // head chunks of 8 rows of 1024 logits (and every buffer of the model still binds)
  return std::make_unique<vulkan::VulkanExecutor>(m, o);
}

Session run_session(backend::Executor& vk, const model::Model& m) {
  const model::HParams& hp = m.hp();
  const int V = hp.n_vocab;
  Session out;
  auto keep = [&](Pass& p, const std::vector<float>& l) {
    out.logits.push_back(l);
    out.stats.insert(out.stats.end(), {p.stats.tokens, p.stats.expert_rows, p.stats.distinct_experts});
  };
  auto keep_top = [&](const std::vector<sampling::RowTop>& t) {
    for (const sampling::RowTop& r : t) {
      out.tops.push_back(r.n);
      for (int i = 0; i < r.n; ++i) {
        out.tops.push_back(r.top[i].id);
        int32_t bits;
        std::memcpy(&bits, &r.top[i].logit, 4);
        out.tops.push_back(bits);
      }
    }
  };
  auto argmax = [&](const std::vector<float>& l, size_t row) {
    const float* r = l.data() + row * V;
    return static_cast<int32_t>(std::max_element(r, r + V) - r);
  };
  auto a = vk.new_sequence(96, {DType::F16, DType::Q8_0});
  auto b = vk.new_sequence(96, {DType::F16, DType::F16});
  // Prefill: every row of a (two head chunks), the last row of b with a selection.
  const std::vector<int32_t> pa = testing::random_tokens(13, V, 1), pb = testing::random_tokens(5, V, 2);
  {
    std::vector<float> l(pa.size() * V);
    Pass p = Pass::causal(*a, pa, LogitRows::All, l.data());
    vk.run(p);
    keep(p, l);
    std::vector<float> lb(V);
    std::vector<sampling::RowTop> t(1);
    Pass q = Pass::causal(*b, pb, LogitRows::Last, lb.data());
    q.top_k = 8, q.top = t.data();
    vk.run(q);
    keep(q, lb);
    keep_top(t);
  }
  // A greedy decode of a alone: one shape, many steps.
  int32_t next = 7;
  for (int i = 0; i < 16; ++i) {
    std::vector<float> l(V);
    const std::vector<int32_t> step = {next};
    Pass p = Pass::causal(*a, step, LogitRows::Last, l.data());
    vk.run(p);
    keep(p, l);
    next = argmax(l, 0);
  }
  out.states.push_back(a->committed_state());
  // a and b decoding together (b's rows by selection only).
  int32_t next_b = 3;
  for (int i = 0; i < 6; ++i) {
    std::vector<float> l(V);
    std::vector<sampling::RowTop> t(1);
    const std::vector<int32_t> sa = {next}, sb = {next_b};
    std::vector<Pass> ps = {Pass::causal(*a, sa, LogitRows::Last, l.data()), Pass::causal(*b, sb, LogitRows::Last, nullptr)};
    ps[1].top_k = 5, ps[1].top = t.data();
    vk.run(ps);
    keep(ps[0], l);
    keep_top(t);
    next = argmax(l, 0);
    next_b = t[0].top[0].id;
  }
  // Denoising passes: the same block shape at two positions of a, then stacked with a causal step.
  std::vector<int32_t> block(8, hp.mask_token);
  block[0] = next;
  const std::vector<int32_t> rows = {0, 2, 5};
  for (int i = 0; i < 2; ++i) {
    std::vector<float> l(block.size() * V);
    Pass p = Pass::denoise(*a, block, rows, l.data(), true);
    vk.run(p);
    for (int32_t r : rows) out.logits.emplace_back(l.begin() + r * V, l.begin() + (r + 1) * V);
    const std::vector<int32_t> step = {next};
    std::vector<float> ls(V);
    Pass q = Pass::causal(*a, step, LogitRows::Last, ls.data());
    vk.run(q);
    keep(q, ls);
    next = argmax(ls, 0);
    block[0] = next;
  }
  {
    std::vector<float> ld(block.size() * V), lc(V);
    const std::vector<int32_t> step = {next_b};
    std::vector<Pass> ps = {Pass::denoise(*a, block, {}, ld.data(), false), Pass::causal(*b, step, LogitRows::Last, lc.data())};
    vk.run(ps);
    keep(ps[0], ld);
    keep(ps[1], lc);
  }
  out.states.push_back(a->committed_state());
  out.states.push_back(b->committed_state());
  // A snapshot of a, three steps, the restore, the same three steps.
  {
    auto snap = a->new_snapshot();
    a->save(*snap);
    const std::vector<int32_t> more = testing::random_tokens(3, V, 4);
    for (int round = 0; round < 2; ++round) {
      if (round == 1) a->restore(*snap);
      for (int32_t t : more) {
        std::vector<float> l(V);
        const std::vector<int32_t> step = {t};
        Pass p = Pass::causal(*a, step, LogitRows::Last, l.data());
        vk.run(p);
        keep(p, l);
      }
    }
  }
  // b reset and prefilled again (a prefill of a shape seen before), then replaced by a new
  // sequence (which may well get b's address) running the same passes.
  for (int round = 0; round < 2; ++round) {
    if (round == 0) b->reset();
    if (round == 1) {
      b.reset();
      b = vk.new_sequence(96, {DType::F16, DType::F16});
    }
    std::vector<float> lb(V);
    Pass q = Pass::causal(*b, pb, LogitRows::Last, lb.data());
    vk.run(q);
    keep(q, lb);
    const std::vector<int32_t> step = {9};
    Pass r = Pass::causal(*b, step, LogitRows::Last, lb.data());
    vk.run(r);
    keep(r, lb);
    out.states.push_back(b->committed_state());
  }
  // Guess-then-verify greedy decoding on a (denoising drafts, verify and commit passes).
  {
    sampling::SamplingParams sp;
    sp.temperature = 0;
    sampling::Sampler sampler(sp, V);
    std::vector<int32_t> committed = pa;
    decode::Context ctx{[&](Pass& q) { vk.run(q); }, *a, sampler, committed, V};
    decode::Options o;
    o.max_tokens = 14;
    o.block_size = 6;
    o.mask_token = hp.mask_token;
    decode::Stats st;
    decode::decode_spec(ctx, next, o, [&](int32_t t) { out.spec_out.push_back(t); return true; }, st);
    EXPECT_GT(st.denoise_passes, 0);
  }
  out.states.push_back(a->committed_state());
  return out;
}

TEST(VulkanRecordedPasses, ResubmittedPassesAreBitwiseThePassesRecordedAnew) {
  TempDir d;
  synth::SynthConfig c = synth::preset("tiny");
  c.type = DType::Q8_0;
  c.n_vocab = 1024;  // logits rows of 4 KiB: the lowered binding limit holds 8 of them
  auto m = model::Model::load(testing::write_synth(d, "m.gguf", c));
  auto plain = make_executor(*m, true, 32);
  if (!plain) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";
  EXPECT_EQ(plain->recorded_passes(), nullptr);
  const Session want = run_session(*plain, *m);
  for (int capacity : {32, 2}) {
    auto vk = make_executor(*m, false, capacity);
    const Session got = run_session(*vk, *m);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    for (size_t i = 0; i < want.logits.size(); ++i) EXPECT_EQ(got.logits[i], want.logits[i]) << "logits " << i << ", cache of " << capacity;
    EXPECT_EQ(got.states, want.states) << "cache of " << capacity;
    EXPECT_EQ(got.stats, want.stats) << "cache of " << capacity;
    EXPECT_EQ(got.tops, want.tops) << "cache of " << capacity;
    EXPECT_EQ(got.spec_out, want.spec_out) << "cache of " << capacity;
    const vulkan::PassCache* cache = vk->recorded_passes();
    ASSERT_NE(cache, nullptr);
    EXPECT_LE(cache->size(), static_cast<size_t>(capacity));
    std::printf("cache of %d: %zu shapes kept, %llu passes resubmitted, %llu recorded\n", capacity, cache->size(),
                static_cast<unsigned long long>(cache->hits()), static_cast<unsigned long long>(cache->misses()));
    // The decode steps alone resubmit at least 15 times whatever the capacity.
    EXPECT_GE(cache->hits(), capacity > 2 ? 30u : 15u);
    expect_silent_validation(*vk);
  }
  expect_silent_validation(*plain);
}

// The cache's bookkeeping, without a device: a find makes an entry the most recently used, an add
// past the capacity drops the least recently used, and an entry whose recording did not complete
// is never found.
TEST(PassCache, DropsTheLeastRecentlyUsedShape) {
  vulkan::PassCache cache(2);
  const std::vector<int64_t> k1 = {1, 1}, k2 = {1, 2}, k3 = {1, 3};
  EXPECT_EQ(cache.find(k1), nullptr);
  cache.add(k1).complete = true;
  vulkan::RecordedPass& r2 = cache.add(k2);
  EXPECT_EQ(cache.find(k2), nullptr);  // not complete yet
  r2.complete = true;
  EXPECT_EQ(cache.find(k2), &r2);
  ASSERT_NE(cache.find(k1), nullptr);  // k1 now the most recent: k2 goes next
  cache.add(k3).complete = true;
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(k2), nullptr);
  EXPECT_NE(cache.find(k1), nullptr);
  EXPECT_NE(cache.find(k3), nullptr);
  EXPECT_EQ(cache.hits(), 4u);
  EXPECT_EQ(cache.misses(), 3u);
}

}  // namespace
}  // namespace clover
