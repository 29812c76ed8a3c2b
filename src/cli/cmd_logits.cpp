// clover logits: raw float32 logits for given token ids, row-major [position][n_vocab], for
// comparison with other implementations (llama.cpp, the PyTorch reference).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cache_options.h"
#include "cli/device_options.h"
#include "cli/load_options.h"
#include "cli/commands.h"
#include "cli/ranges.h"
#include "cli/output_path.h"
#include "cli/token_file.h"
#include "clover/clover.h"

namespace clover::cli {

Runner add_logits_command(CLI::App& app) {
  struct Args {
    std::string model, tokens_file, out;
    bool all = false;
    int threads = 0, n_ctx = 0, batch = 256;
    int chunk = 0;
    std::string routing_trace;
    std::string denoise_block;
    bool no_reverse = false;
    std::string cache_type_k = "f32", cache_type_v = "f32";  // exact by default: this is the comparison tool
    DeviceArgs dev;
    LoadArgs load;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("logits", "write raw float32 logits for a list of token ids");
  c->add_option("-m,--model", a->model, "GGUF model file")->required();
  c->add_option("--tokens", a->tokens_file, "JSON file with an array of token ids (with --denoise: the committed prefix, may be [])")->required();
  c->add_option("--denoise", a->denoise_block, "JSON file with a block [pending, tokens or mask ids...]: write the logits of one denoising pass after the prefix");
  c->add_flag("--no-reverse", a->no_reverse, "denoise without the reverse in-block GDN path");
  c->add_option("--out", a->out, "output file: float32 [position][n_vocab]")->required();
  c->add_flag("--all", a->all, "logits of every position (default: the last one)");
  c->add_option("-t,--threads", a->threads, "threads (0: all cores)")->check(in_range(0, kMaxThreads));
  c->add_option("-c,--ctx-size", a->n_ctx, "context size (0: the number of tokens)")->check(in_range(0, kMaxContext));
  add_cache_type_options(c, a->cache_type_k, a->cache_type_v);
  add_device_options(c, a->dev);
  add_load_options(c, a->load);
  c->add_option("-b,--batch", a->batch, "tokens per forward pass");
  c->add_option("--chunk", a->chunk, "feed the tokens in calls of this many tokens (0: one call), to test state carry-over");
  c->add_option("--trace-routing", a->routing_trace, "write every MoE routing decision (layer position experts margin) to FILE");
  return [a] {
    check_output_path(a->out, "--out");
    // With --denoise the prefix may be empty (a block at the start of a sequence).
    const std::vector<int32_t> ids = read_token_file(a->tokens_file, !a->denoise_block.empty());
    const std::vector<int32_t> block = a->denoise_block.empty() ? std::vector<int32_t>{} : read_token_file(a->denoise_block);
    EngineOptions eo;
    apply_device_options(a->dev, eo);
    apply_load_options(a->load, eo);
    eo.n_threads = a->threads;
    eo.n_ctx = a->n_ctx > 0 ? a->n_ctx : static_cast<int>(ids.size() + block.size());
    eo.max_batch = a->batch;
    eo.cache_type_k = cache_type_from_name(a->cache_type_k);
    eo.cache_type_v = cache_type_from_name(a->cache_type_v);
    eo.routing_trace = a->routing_trace;
    auto engine = Engine::load(a->model, eo);
    for (const auto& w : engine->info().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    auto session = engine->new_session();
    std::vector<float> out;
    const size_t step = a->chunk > 0 ? static_cast<size_t>(a->chunk) : ids.size();
    for (size_t b = 0; b < ids.size() && !ids.empty(); b += step) {
      const size_t n = std::min(step, ids.size() - b);
      const bool last = b + n == ids.size();
      std::vector<float> l = session->eval(std::span<const int32_t>(ids.data() + b, n), a->all);
      if (a->all) out.insert(out.end(), l.begin(), l.end());
      else if (last) out = std::move(l);
    }
    if (!block.empty()) out = session->denoise(block, !a->no_reverse);
    FILE* f = std::fopen(a->out.c_str(), "wb");
    if (!f) throw Error("cannot write " + a->out);
    const size_t written = std::fwrite(out.data(), sizeof(float), out.size(), f);
    if (std::fclose(f) != 0 || written != out.size()) throw Error("failed writing " + a->out);
    std::fprintf(stderr, "wrote %zu x %d logits to %s\n", out.size() / engine->info().n_vocab, engine->info().n_vocab, a->out.c_str());
    return 0;
  };
}

}  // namespace clover::cli
