// The host's cost of an AR step on a Vulkan device with every pass recorded anew
// (Options::record_every_pass) and with the pass recorded once and resubmitted
// (recorded_pass.h), the only difference between the two executors (docs/vulkan.md, "Recorded
// passes").
//
// usage: vulkan_record_bench [PRESET] [--steps 32] [--device 0]
//   PRESET: a synth preset (tiny, mid; default tiny).
// Reported per executor, medians over --steps greedy decode steps of one sequence (after an
// 8-token prompt and two warm-up steps; the selection on the device, as the engine's greedy
// decoding): the wall time of a step, and the CPU time of the thread that called run(), which is
// the host's part (recording, submitting, reading the selection back) where the device works on
// threads of its own, as lavapipe does.
#include <time.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "args.h"
#include "backend/vulkan/executor/vulkan_executor.h"
#include "synth/synth.h"
#include "timing.h"

using namespace clover;

int main(int argc, char** argv) {
  const bool has_preset = argc > 1 && argv[1][0] != '-';
  const std::string preset = has_preset ? argv[1] : "tiny";
  int steps = 32, device = 0;
  if (!bench::parse_int_flags(argc, argv, has_preset ? 2 : 1, {{"--steps", &steps}, {"--device", &device}}) || steps < 1) {
    std::fprintf(stderr, "usage: %s [PRESET] [--steps 32] [--device 0]\n", argv[0]);
    return 2;
  }
  try {
    const synth::SynthConfig c = synth::preset(preset);
    const std::string path = (std::filesystem::temp_directory_path() / "clover_vulkan_record_bench.gguf").string();
    synth::write_model(c, path);
    auto m = model::Model::load(path);
    std::filesystem::remove(path);
    const int V = m->hp().n_vocab;
    std::vector<int32_t> prompt(8);
    std::mt19937 rng(7);
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
    std::printf("preset %s: %d layers, hidden %d, %d experts; AR steps of one sequence\n", preset.c_str(), m->hp().n_layer,
                m->hp().n_embd, m->hp().n_expert);
    std::vector<int32_t> out[2];
    double wall[2] = {0, 0};
    for (int resubmit = 0; resubmit < 2; ++resubmit) {
      vulkan::VulkanExecutor::Options o;
      o.device = "vulkan:" + std::to_string(device);
      o.verbose = false;
      o.record_every_pass = resubmit == 0;
      vulkan::VulkanExecutor ex(*m, o);
      if (resubmit == 0) std::printf("device: %s\n", std::string(ex.name()).c_str());
      auto s = ex.new_sequence(static_cast<int>(prompt.size()) + steps + 4, {});
      sampling::RowTop top;
      backend::Pass p = backend::Pass::causal(*s, prompt, backend::LogitRows::Last, nullptr);
      p.top_k = 1, p.top = &top;
      ex.run(p);
      std::vector<double> t_wall, t_cpu;
      for (int i = 0; i < steps + 2; ++i) {  // the first two are the warm-up
        const std::vector<int32_t> step = {top.top[0].id};
        backend::Pass q = backend::Pass::causal(*s, step, backend::LogitRows::Last, nullptr);
        q.top_k = 1, q.top = &top;
        const double w0 = bench::now(), c0 = 1e3 * bench::cpu_now(CLOCK_THREAD_CPUTIME_ID);
        ex.run(q);
        const double c1 = 1e3 * bench::cpu_now(CLOCK_THREAD_CPUTIME_ID), w1 = bench::now();
        if (i >= 2) t_wall.push_back((w1 - w0) * 1e3), t_cpu.push_back(c1 - c0);
        out[resubmit].push_back(top.top[0].id);
      }
      wall[resubmit] = bench::median(t_wall);
      std::printf("%-26s step %8.3f ms wall, %8.3f ms CPU of the calling thread\n",
                  resubmit ? "recorded once, resubmitted:" : "recorded every step:", wall[resubmit], bench::median(t_cpu));
    }
    std::printf("same tokens: %s; wall saved per step %.3f ms\n", out[0] == out[1] ? "yes" : "NO", wall[0] - wall[1]);
    return out[0] == out[1] ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
