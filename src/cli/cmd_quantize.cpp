// clover quantize IN OUT TYPE [THREADS]: llama-quantize's argument order and preset names.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "quantize/quantize.h"
#include "runtime/memory_stats.h"

namespace clover::cli {

Runner add_quantize_command(CLI::App& app) {
  struct Args {
    std::string in, out, type;
    int threads = 0;
    bool allow_requantize = false, quiet = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("quantize", "quantise a F32/F16/BF16 GGUF file with one of llama-quantize's presets");
  c->add_option("in", a->in, "input GGUF file")->required();
  c->add_option("out", a->out, "output GGUF file (written atomically)")->required();
  c->add_option("type", a->type, "Q4_K_M Q4_K_S Q5_K_M Q5_K_S Q6_K Q3_K_M Q3_K_S Q2_K Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS")->required();
  c->add_option("nthreads", a->threads, "threads (as llama-quantize's last argument)");
  c->add_option("-t,--threads", a->threads, "threads (default: all cores)");
  c->add_flag("--allow-requantize", a->allow_requantize, "accept Q8_0 tensors in the input");
  c->add_flag("-q,--quiet", a->quiet, "no progress output");
  return [a] {
    const auto t0 = std::chrono::steady_clock::now();
    quantize::Options opt;
    opt.preset = a->type;
    opt.threads = a->threads;
    opt.allow_requantize = a->allow_requantize;
    int last = -1;
    opt.progress = [&](uint64_t done, uint64_t total) {
      const int pct = total ? static_cast<int>(100.0 * done / total) : 100;
      if (a->quiet || pct == last) return;
      last = pct;
      constexpr int kWidth = 40;
      std::string bar(static_cast<size_t>(kWidth * pct / 100), '#');
      bar.resize(kWidth, '.');
      std::fprintf(stderr, "\rquantize: [%s] %3d%% (%.1f / %.1f MiB)", bar.c_str(), pct, done / 1048576.0, total / 1048576.0);
    };
    const quantize::Summary s = quantize::quantize_file(a->in, a->out, opt);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!a->quiet) {
      std::fprintf(stderr, "\rquantize: wrote %s (%s) in %.1f s: %.2f MiB -> %.2f MiB, peak memory %.1f MiB\n", a->out.c_str(),
                   a->type.c_str(), secs, s.in_bytes / 1048576.0, s.out_bytes / 1048576.0, peak_rss_bytes() / 1048576.0);
      for (const auto& [t, e] : s.by_type)
        std::fprintf(stderr, "  %-5s %5d tensors %10.2f MiB\n", std::string(dtype_name(t)).c_str(), e.first, e.second / 1048576.0);
    }
    return 0;
  };
}

}  // namespace clover::cli
