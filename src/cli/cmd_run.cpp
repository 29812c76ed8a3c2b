// clover run: generate text from a prompt, streaming it as it is produced.
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/block_view.h"
#include "cli/cache_options.h"
#include "cli/device_options.h"
#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/env_args.h"
#include "cli/load_options.h"
#include "cli/ranges.h"
#include "cli/sampling_flags.h"
#include "cli/model_template.h"
#include "cli/token_file.h"
#include "clover/clover.h"

namespace clover::cli {

namespace {
struct RunArgs {
  std::string model;
  std::string prompt;
  int n_predict = 128;
  int n_ctx = 0;
  int threads = 0;
  SamplingOptions sampling;  // greedy unless a flag says otherwise
  int64_t seed = 0;
  bool special = false;
  bool ignore_eos = false;
  std::string prompt_tokens;  // JSON file of token ids instead of -p
  bool print_tokens = false;
  std::string mode = "ar";
  float threshold = -1.0f;
  int block = 0;
  bool show_blocks = false;
  bool chat = false, no_think = false;
  std::string cache_type_k = "f16", cache_type_v = "f16";
  DeviceArgs dev;
  LoadArgs load;
};

}  // namespace

std::string default_model_path();

Runner add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* c = app.add_subcommand("run", "generate text from a prompt");
  c->add_option("-m,--model", a->model, "GGUF model file (default: the shipped model)");
  auto* p = c->add_option("-p,--prompt", a->prompt, "prompt text");
  auto* pt = c->add_option("--prompt-tokens", a->prompt_tokens, "JSON file with the prompt as token ids");
  p->excludes(pt);
  c->add_flag("--print-tokens", a->print_tokens, "print the generated token ids as a JSON array at the end (stdout)");
  c->add_option("-n,--n-predict", a->n_predict, "tokens to generate")->check(CLI::NonNegativeNumber);
  c->add_option("-c,--ctx-size", a->n_ctx, "context size in tokens (0: the model's, at most 131072)")->check(in_range(0, kMaxContext));
  add_cache_type_options(c, a->cache_type_k, a->cache_type_v);
  add_device_options(c, a->dev);
  add_load_options(c, a->load);
  c->add_option("-t,--threads", a->threads, "threads (0: all cores)")->check(in_range(0, kMaxThreads));
  add_sampling_options(c, a->sampling, a->seed);
  c->add_flag("--special", a->special,
              "parse special tokens written in the prompt (with --chat: in the message; else only the template writes them)");
  c->add_flag("--ignore-eos", a->ignore_eos, "keep generating after an end-of-generation token");
  c->add_flag("--chat", a->chat, "send the prompt as a user message through the model's chat template");
  c->add_flag("--no-think", a->no_think, "with --chat: render with enable_thinking = false");
  c->add_option("--mode", a->mode, "decoding mode: ar, diffusion (block diffusion) or spec (guess-then-verify)")
      ->check(CLI::IsMember({"ar", "diffusion", "spec"}));
  c->add_option("--threshold", a->threshold, "diffusion confidence threshold (default: the model's, 0.95)")
      ->check(in_range(0, 1, /*lo_open=*/true));
  c->add_option("--block", a->block, "positions per block (default: the model's, 32)")->check(in_range(1, 4096));
  c->add_flag("--show-blocks", a->show_blocks, "draw each block filling in, pass by pass (stderr; redrawn in place on a terminal)");
  add_env_args(c, {"model", "ctx-size", "threads", "cache-type-k", "cache-type-v", "temp", "top-k", "top-p", "min-p",
                   "presence-penalty", "frequency-penalty", "repeat-penalty", "repeat-last-n", "seed", "n-predict", "device", "n-gpu-layers"});
  return [a] {
    EngineOptions eo;
    apply_device_options(a->dev, eo);
    apply_load_options(a->load, eo);
    eo.n_threads = a->threads;
    eo.n_ctx = a->n_ctx;
    eo.cache_type_k = cache_type_from_name(a->cache_type_k);
    eo.cache_type_v = cache_type_from_name(a->cache_type_v);
    const std::string path = a->model.empty() ? default_model_path() : a->model;
    auto engine = Engine::load(path, eo);
    for (const auto& w : engine->info().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::fprintf(stderr, "%s\n", context_summary(engine->info()).c_str());
    auto session = engine->new_session();
    if (a->prompt.empty() && a->prompt_tokens.empty()) throw Error("give a prompt with -p or --prompt-tokens");
    if (a->no_think && !a->chat) throw Error("--no-think needs --chat");
    if (a->chat && a->prompt.empty()) throw Error("--chat needs a prompt given with -p");
    std::vector<int32_t> prompt;
    if (a->chat) {
      // As the server renders a one-message conversation: the template decides the special tokens.
      const ModelTemplate mt = read_model_template(path);
      chat::ChatRequest req;
      req.messages = chat::json::array({{{"role", "user"}, {"content", a->prompt}}});
      if (a->no_think) req.kwargs["enable_thinking"] = false;
      req.add_generation_prompt = true;
      chat::ChatTemplate tmpl(mt.source, mt.bos, mt.eos);
      if (!a->special) tmpl.keep_as_text(engine->control_texts());
      const chat::RenderedPrompt rp = tmpl.apply(req);
      for (const chat::PromptPiece& p : chat::prompt_pieces(rp.prompt, rp.literal)) {
        const std::vector<int32_t> ids = engine->tokenize(p.text, p.parse_special);
        prompt.insert(prompt.end(), ids.begin(), ids.end());
      }
    } else {
      prompt = a->prompt_tokens.empty() ? engine->tokenize(a->prompt, a->special) : read_token_file(a->prompt_tokens);
    }
    GenerateOptions go;
    go.max_tokens = a->n_predict;
    go.ignore_eos = a->ignore_eos;
    go.sampling = a->sampling;
    go.sampling.seed = resolve_seed(a->seed);
    go.mode = a->mode == "diffusion" ? DecodeMode::Diffusion : a->mode == "spec" ? DecodeMode::Spec : DecodeMode::AR;
    go.threshold = a->threshold;
    go.block_size = a->block;
    // On a terminal the blocks are redrawn in place on stderr; the answer, when stdout is that
    // terminal too, is held and printed after them so the two never interleave.
    const bool blocks_tty = a->show_blocks && BlockView::is_tty(stderr);
    std::optional<BlockView> blocks;
    if (a->show_blocks) blocks.emplace(*engine, go.mode, stderr, blocks_tty, BlockView::columns(stderr));
    if (blocks) go.on_block = [&blocks](const BlockEvent& b) { blocks->show(b); };
    const bool hold_text = blocks_tty && BlockView::is_tty(stdout);
    std::string held;
    const bool show_text = !a->print_tokens;
    if (show_text && !a->chat && !hold_text) std::fputs(a->prompt.c_str(), stdout);
    std::vector<int32_t> generated;
    Event last = session->generate(prompt, go, [&](const Event& ev) {
      generated.insert(generated.end(), ev.tokens.begin(), ev.tokens.end());
      if (show_text && hold_text) {
        held += ev.text;
      } else if (show_text) {
        std::fputs(ev.text.c_str(), stdout);
        std::fflush(stdout);
      }
      return true;
    });
    if (blocks) blocks->finish();
    if (show_text && hold_text) {
      std::fprintf(stdout, "\n%s%s", a->chat ? "" : a->prompt.c_str(), held.c_str());
      std::fflush(stdout);
    }
    if (a->print_tokens) std::printf("%s\n", nlohmann::json(generated).dump().c_str());
    const GenerateStats& s = last.stats;
    std::fprintf(stderr, "\n\nprompt: %d tokens in %.3f s (%.1f tok/s)\ngeneration: %d tokens in %.3f s (%.1f tok/s), threads %d\n",
                 s.prompt_tokens, s.prompt_seconds, s.prompt_seconds > 0 ? s.prompt_tokens / s.prompt_seconds : 0.0,
                 s.generated_tokens, s.generate_seconds, s.generate_seconds > 0 ? s.generated_tokens / s.generate_seconds : 0.0,
                 engine->n_threads());
    if (go.mode != DecodeMode::AR)
      std::fprintf(stderr, "mode %s: %d passes (%d denoising, %.3f s), %d blocks, %.2f tokens per pass\n", a->mode.c_str(), s.passes,
                   s.denoise_passes, s.denoise_seconds, s.blocks, s.passes > 0 ? double(s.generated_tokens) / s.passes : 0.0);
    return 0;
  };
}

}  // namespace clover::cli
