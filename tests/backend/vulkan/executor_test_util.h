// What the whole-model Vulkan tests share: a Vulkan executor with validation on (or a skip), the
// zero-messages check, and the CPU-vs-Vulkan agreement of two sets of logits rows.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/vulkan/executor/vulkan_executor.h"
#include "backend/vulkan/vk_test_util.h"  // test_validation
#include "model/model_test_util.h"         // TempDir, write_synth
#include "synth/synth.h"

namespace clover {

inline std::string test_device() {
  const char* e = std::getenv("CLOVER_VK_TEST_DEVICE");
  return std::string("vulkan:") + (e ? e : "0");
}

// The tiny synthetic model in one weight type and file layout, written into d and loaded.
inline std::unique_ptr<model::Model> tiny_model(const testing::TempDir& d, DType type,
                                                model::Layout layout = model::Layout::Official) {
  synth::SynthConfig c = synth::preset("tiny");
  c.type = type;
  c.layout = layout;
  return model::Model::load(testing::write_synth(d, "m.gguf", c));
}

// The options of a test's Vulkan executor (validation on, 2 threads), or nullopt when there is no
// device. experts_on_host: [layer][expert] the routed experts that stay in host RAM (empty: none);
// stream_rows: --stream-experts (0: off).
inline std::optional<vulkan::VulkanExecutor::Options> test_options(int max_batch, vulkan::ExpertsOnHost experts_on_host = {},
                                                                   int stream_rows = 0) {
  std::string error;
  auto probe = vulkan::Instance::create({}, error);
  if (!probe || probe->devices().empty()) return std::nullopt;
  vulkan::VulkanExecutor::Options o;
  o.device = test_device();
  o.max_batch = max_batch;
  o.validate = vulkan::test::test_validation();
  o.verbose = false;
  o.experts_on_host = std::move(experts_on_host);
  o.stream_rows = stream_rows;
  o.n_threads = 2;
  return o;
}

// A Vulkan executor with validation on, or nullptr when there is no device.
inline std::unique_ptr<vulkan::VulkanExecutor> make_vulkan(const model::Model& m, int max_batch = 256,
                                                           vulkan::ExpertsOnHost experts_on_host = {}, int stream_rows = 0) {
  auto o = test_options(max_batch, std::move(experts_on_host), stream_rows);
  return o ? std::make_unique<vulkan::VulkanExecutor>(m, *o) : nullptr;
}

#define VULKAN_OR_SKIP(var, ...)                                          \
  auto var = make_vulkan(__VA_ARGS__);                                    \
  if (!var) {                                                             \
    GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers)";     \
  }                                                                       \
  static_assert(true)

inline void expect_silent_validation(const vulkan::VulkanExecutor& vk) {
  if (!vulkan::test::test_validation()) return;
  EXPECT_TRUE(vk.instance().validation_layer_active()) << "the validation layer never reported itself active";
  EXPECT_EQ(vk.instance().validation_messages(), 0u) << "the validation layer reported problems (printed above)";
}

struct Agreement {
  double top1 = 0, mean_kl = 0, max_kl = 0, max_abs = 0;
  // Top-1 agreement where a disagreement within kNearTie logits of the CPU's best counts as one:
  // on random-weight models the best logits of a row are often that close, and one rounding of a
  // quantised activation (a fused fma on a GPU) flips the pick with no error anywhere.
  double top1_near = 0;
};
constexpr double kNearTie = 0.1;

// Teacher forcing: `toks` as one causal pass of each sequence on its executor, with every
// position's logits ([toks][V]) and each pass's statistics.
struct TeacherForced {
  std::vector<float> cpu, vk;
  backend::PassStats cpu_stats, vk_stats;
};
inline TeacherForced teacher_forced(backend::Executor& cpu, backend::Sequence& cs, backend::Executor& vk,
                                    backend::Sequence& vs, const std::vector<int32_t>& toks, int V) {
  TeacherForced r;
  r.cpu.resize(toks.size() * V), r.vk.resize(toks.size() * V);
  backend::Pass pc = backend::Pass::causal(cs, toks, backend::LogitRows::All, r.cpu.data());
  backend::Pass pv = backend::Pass::causal(vs, toks, backend::LogitRows::All, r.vk.data());
  cpu.run(pc);
  vk.run(pv);
  r.cpu_stats = pc.stats, r.vk_stats = pv.stats;
  return r;
}

// Per position: KL(cpu || vulkan) of the softmaxes, top-1 agreement, largest |difference|.
inline Agreement compare(const std::vector<float>& cpu, const std::vector<float>& vk, int V) {
  Agreement a;
  const size_t n = cpu.size() / V;
  for (size_t r = 0; r < n; ++r) {
    const float* p = cpu.data() + r * V;
    const float* q = vk.data() + r * V;
    const int ap = static_cast<int>(std::max_element(p, p + V) - p), aq = static_cast<int>(std::max_element(q, q + V) - q);
    a.top1 += ap == aq;
    a.top1_near += ap == aq || p[aq] >= p[ap] - kNearTie;
    double mp = p[ap], mq = q[aq], zp = 0, zq = 0;
    for (int i = 0; i < V; ++i) zp += std::exp(p[i] - mp), zq += std::exp(q[i] - mq);
    double kl = 0;
    for (int i = 0; i < V; ++i) {
      const double lp = p[i] - mp - std::log(zp), lq = q[i] - mq - std::log(zq);
      kl += std::exp(lp) * (lp - lq);
      a.max_abs = std::max(a.max_abs, static_cast<double>(std::fabs(p[i] - q[i])));
    }
    a.mean_kl += kl;
    a.max_kl = std::max(a.max_kl, kl);
  }
  a.top1 /= static_cast<double>(n);
  a.top1_near /= static_cast<double>(n);
  a.mean_kl /= static_cast<double>(n);
  return a;
}

}  // namespace clover
