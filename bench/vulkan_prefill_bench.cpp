// Prefill time of a synthetic model on a Vulkan device with the GDN delta rule token by token
// (gdn_step.comp) and with the chunked scan (gdn_scan.comp), the only difference between the two
// executors; and how far apart their logits are (docs/vulkan.md, "The chunked GDN scan").
//
// usage: vulkan_prefill_bench [PRESET] [--tokens 256] [--reps 3] [--device 0] [--head-dim D]
//   PRESET: a synth preset (tiny, mid; default tiny); --head-dim overrides its GDN head dim.
// Reported: the median wall time and process CPU time (lavapipe runs shaders on this process's
// threads; on a loaded machine the CPU time is the steadier figure) of a prefill of --tokens
// tokens from an empty sequence (logits of the last position only), for each executor, after one
// warm-up pass each.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
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
  int tokens = 256, reps = 3, device = 0, head_dim = 0;
  if (!bench::parse_int_flags(argc, argv, has_preset ? 2 : 1,
                              {{"--tokens", &tokens}, {"--reps", &reps}, {"--device", &device}, {"--head-dim", &head_dim}}) ||
      tokens < 1 || reps < 1) {
    std::fprintf(stderr, "usage: %s [PRESET] [--tokens 256] [--reps 3] [--device 0] [--head-dim D]\n", argv[0]);
    return 2;
  }
  try {
    synth::SynthConfig c = synth::preset(preset);
    if (head_dim > 0) c.gdn_head_dim = head_dim;
    const std::string path = (std::filesystem::temp_directory_path() / "clover_vulkan_prefill_bench.gguf").string();
    synth::write_model(c, path);
    auto m = model::Model::load(path);
    std::filesystem::remove(path);
    const int V = m->hp().n_vocab;
    std::vector<int32_t> toks(static_cast<size_t>(tokens));
    std::mt19937 rng(7);
    for (int32_t& t : toks) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
    std::printf("preset %s: %d layers (%d GDN), GDN head dim %d, %d value heads; prefill of %d tokens\n", preset.c_str(),
                m->hp().n_layer, m->hp().n_gdn_layers(), m->hp().gdn_head_dim, m->hp().gdn_v_heads, tokens);
    std::vector<float> last[2];
    double ms[2] = {0, 0}, cpu_ms[2] = {0, 0};
    for (int scan = 0; scan < 2; ++scan) {
      vulkan::VulkanExecutor::Options o;
      o.device = "vulkan:" + std::to_string(device);
      o.max_batch = std::max(tokens, 1);
      o.verbose = false;
      o.gdn_scan = scan == 1;
      vulkan::VulkanExecutor ex(*m, o);
      if (scan == 0) std::printf("device: %s\n", std::string(ex.name()).c_str());
      last[scan].resize(static_cast<size_t>(V));
      std::vector<double> t, c;
      for (int r = 0; r <= reps; ++r) {  // the first is the warm-up
        auto s = ex.new_sequence(tokens + 1, {});
        backend::Pass p = backend::Pass::causal(*s, toks, backend::LogitRows::Last, last[scan].data());
        const double t0 = bench::now(), c0 = bench::cpu_now();
        ex.run(p);
        if (r > 0) t.push_back((bench::now() - t0) * 1e3), c.push_back((bench::cpu_now() - c0) * 1e3);
      }
      ms[scan] = bench::median(t);
      cpu_ms[scan] = bench::median(c);
      std::printf("gdn %-24s prefill %9.1f ms wall (%.1f tokens/s), %9.1f ms CPU\n",
                  scan ? "scan (chunks of 64):" : "step (token by token):", ms[scan], tokens / ms[scan] * 1e3, cpu_ms[scan]);
    }
    double worst = 0;
    for (int i = 0; i < V; ++i) worst = std::max(worst, static_cast<double>(std::fabs(last[0][i] - last[1][i])));
    std::printf("speed-up %.2fx wall, %.2fx CPU; last position's logits, max |step - scan| %.3g\n", ms[0] / ms[1],
                cpu_ms[0] / cpu_ms[1], worst);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
