// clover bench: throughput of the engine in the manner of llama-bench.
//
//   clover bench -m MODEL [-p 512,1024] [-n 128] [--mode ar,diffusion,spec] [-t 1,2] [-r 5] [--json]
//
// Every list option takes comma-separated values (or is repeated); every combination is run.
// For each model and thread count the engine is loaded once, then:
//   ppP    prompt processing: a fresh session evaluates P random tokens and samples one token
//          (t/s = P / prompt seconds; time to first token = wall time until that token arrives)
//   tgN    generation: after a one-token prompt, N tokens with end tokens ignored, in each --mode
//          (t/s = N / generation seconds; diffusion and spec add passes per block / tokens per cycle)
//   blockB (only with --mode diffusion or spec) one denoising pass over a block of B positions
//          (pending token + B-1 masks) after a 64-token prefix, against one AR decode step there,
//          with the distinct routed experts each reads (the reason a block pass is not B x dearer)
// Each test runs one untimed warm-up then -r timed repetitions; t/s is mean +- sample stddev, as
// llama-bench prints it. Timing noise is the caller's business: no result here is a claim, the
// numbers and the command go to docs/benchmarks.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/device_options.h"
#include "cli/load_options.h"
#include "clover/clover.h"
#include "runtime/memory_stats.h"
#include "runtime/page_cache.h"

namespace clover::cli {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kBlockPrefix = 64;  // committed tokens before the block / AR step of the block test

struct BenchArgs {
  std::vector<std::string> models, pp{"512"}, tg{"128"}, threads, modes{"ar"};
  int reps = 5;
  bool json = false, no_warmup = false, quiet = false;
  bool drop_cache = false, wait_prefault = false;
  DeviceArgs dev;
  LoadArgs load;
};

// "512" -> 512; a clear error for anything that is not an integer >= min.
int parse_count(const std::string& opt, const std::string& s, int min) {
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty() || v < min || v > (1 << 24))
    throw Error(fmt::format("{}: '{}' is not an integer in [{}, {}]", opt, s, min, 1 << 24));
  return static_cast<int>(v);
}
std::vector<int> parse_counts(const std::string& opt, const std::vector<std::string>& v, int min) {
  std::vector<int> out;
  for (const auto& s : v) out.push_back(parse_count(opt, s, min));
  return out;
}

struct Summary {
  double mean = 0, stddev = 0, median = 0;
};
Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(ss / double(v.size() - 1));
  }
  std::sort(v.begin(), v.end());
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

// --drop-cache: evicts the file from the page cache (no root needed; pages another process has
// mapped stay), so that the load and the first tokens read it from the disk as after a reboot.
void drop_page_cache(const std::string& path) {
  if (!runtime::drop_from_page_cache(path)) throw Error(fmt::format("--drop-cache: cannot evict {} from the page cache", path));
}

std::string human_bytes(uint64_t b) {
  return b >= (1ull << 30) ? fmt::format("{:.2f} GiB", b / 1073741824.0) : fmt::format("{:.1f} MiB", b / 1048576.0);
}

DecodeMode parse_mode(const std::string& m) {
  return m == "diffusion" ? DecodeMode::Diffusion : m == "spec" ? DecodeMode::Spec : DecodeMode::AR;
}

// Runs the tests of one model at one thread count; every finished test becomes one JSON record
// handed to `report`.
class ModelBench {
 public:
  ModelBench(const std::string& path, int threads, const BenchArgs& a, int n_ctx, std::function<void(nlohmann::json)> report)
      : args_(a), report_(std::move(report)), threads_(threads) {
    EngineOptions eo;
    apply_device_options(a.dev, eo);
    apply_load_options(a.load, eo);
    if (a.quiet) eo.on_progress = nullptr;
    eo.n_threads = threads;
    eo.n_ctx = n_ctx;
    if (a.drop_cache) drop_page_cache(path);
    const auto t_load = Clock::now();
    engine_ = Engine::load(path, eo);
    const double load_seconds = seconds_since(t_load);
    for (const auto& w : engine_->info().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    session_ = engine_->new_session();
    const ModelInfo& mi = engine_->info();
    double prefault_wait = 0;
    if (a.wait_prefault) {
      const auto t0 = Clock::now();
      while (engine_->prefault_status().state == PrefaultStatus::State::Running)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      prefault_wait = seconds_since(t0);
    }
    const PrefaultStatus pf = engine_->prefault_status();
    base_ = {{"model", std::filesystem::path(path).stem().string()},
             {"model_path", path},
             {"architecture", mi.architecture},
             {"layout", mi.layout},
             {"n_layer", mi.n_layer},
             {"weight_type", mi.weight_type},
             {"size_bytes", mi.file_bytes},
             {"n_params", mi.n_params},
             {"threads", engine_->n_threads()},
             {"device", mi.device},
             {"placement", mi.placement},
             {"device_memory_bytes", mi.device_memory_bytes},
             {"mmap", eo.mmap},
             {"repacked_bytes", mi.repacked_bytes},
             {"read_direct", mi.read_direct},
             {"mlock", eo.mlock},
             {"load_seconds", load_seconds},
             {"page_cache_dropped", a.drop_cache},
             {"prefault", std::string(prefault_state_name(pf.state))},
             {"prefault_seconds", pf.seconds},
             {"prefault_wait_seconds", prefault_wait}};
  }

  void prompt_processing(int P) {
    std::vector<double> ts, ttft;
    for (int r = -warmups(); r < args_.reps; ++r) {
      progress(fmt::format("pp{}", P), r);
      const std::vector<int32_t> prompt = random_tokens(P, r);
      session_->reset();
      GenerateOptions go;
      go.max_tokens = 1;
      go.ignore_eos = true;
      const auto t0 = Clock::now();
      double first = -1;
      Event last = session_->generate(prompt, go, [&](const Event& ev) {
        if (first < 0 && !ev.tokens.empty()) first = seconds_since(t0);
        return true;
      });
      if (last.stats.prompt_tokens != P || last.stats.prompt_seconds <= 0)
        throw Error(fmt::format("pp{}: the engine evaluated {} prompt tokens", P, last.stats.prompt_tokens));
      if (r < 0) continue;
      ts.push_back(P / last.stats.prompt_seconds);
      ttft.push_back(first * 1e3);
    }
    nlohmann::json j = record(fmt::format("pp{}", P), "ar", P, 0, ts);
    j["ttft_ms"] = summarize(ttft).median;
    j["ttft_ms_samples"] = ttft;
    report_(std::move(j));
  }

  void generation(int N, const std::string& mode) {
    std::vector<double> ts, passes_per_block, tokens_per_pass, tokens_per_block;
    for (int r = -warmups(); r < args_.reps; ++r) {
      progress(fmt::format("tg{} {}", N, mode), r);
      session_->reset();
      GenerateOptions go;
      go.max_tokens = N;
      go.ignore_eos = true;
      go.mode = parse_mode(mode);
      Event last = session_->generate(random_tokens(1, r), go, [](const Event&) { return true; });
      const GenerateStats& s = last.stats;
      if (s.generated_tokens != N || s.generate_seconds <= 0)
        throw Error(fmt::format("tg{} {}: the engine generated {} tokens", N, mode, s.generated_tokens));
      if (r < 0) continue;
      ts.push_back(N / s.generate_seconds);
      tokens_per_pass.push_back(s.passes > 0 ? double(N) / s.passes : 0.0);
      if (s.blocks > 0) {
        passes_per_block.push_back(double(s.passes) / s.blocks);
        tokens_per_block.push_back(double(N) / s.blocks);
      }
    }
    nlohmann::json j = record(fmt::format("tg{}", N), mode, 0, N, ts);
    j["tokens_per_pass"] = summarize(tokens_per_pass).mean;
    if (mode != "ar") {
      // A diffusion block: denoising passes + its commit pass. A spec cycle: one draft pass + one
      // verify pass, committing the agreed prefix and the verifier's own next token.
      j["passes_per_block"] = summarize(passes_per_block).mean;
      j[mode == "spec" ? "tokens_per_cycle" : "tokens_per_block"] = summarize(tokens_per_block).mean;
    }
    report_(std::move(j));
  }

  // One denoising pass of a block and one commit pass against one AR step after the same prefix,
  // each reading back what the decoders read (selection on the backend: the best entries of each
  // row, not the rows). The commit pass is the block's B tokens causally (each rep on a fresh
  // copy of the prefix: a reset and the prefix again, untimed).
  void block_pass() {
    const ModelInfo& mi = engine_->info();
    const int B = mi.block_size;
    std::vector<double> t_ar, t_block, t_commit;
    double experts_ar = 0, experts_block = 0, experts_commit = 0;
    const std::vector<int32_t> prefix = random_tokens(kBlockPrefix, 0);
    std::vector<int32_t> block(B, mi.mask_token);
    block[0] = prefix.back();
    const std::vector<int32_t> filled = random_tokens(B, 1);
    // Rows for outputs 0..B-2, as the decoders' first pass of a block asks (they predict the
    // B-1 masks; the last output would predict the position after the block).
    std::vector<int32_t> rows(static_cast<size_t>(B - 1));
    for (int i = 0; i < B - 1; ++i) rows[static_cast<size_t>(i)] = i;
    for (int r = -1; r < args_.reps; ++r) {  // always one warm-up: the first passes allocate their scratch
      progress(fmt::format("block{}", B), r);
      session_->reset();
      session_->eval(prefix, false);
      auto t0 = Clock::now();
      session_->denoise_top(block, rows, 2, true);
      const double tb = seconds_since(t0);
      experts_block = double(session_->last_pass().distinct_experts) / mi.n_layer;
      const int32_t step = prefix[static_cast<size_t>(r + 1) % prefix.size()];
      t0 = Clock::now();
      session_->eval_top(std::span<const int32_t>(&step, 1), 2);
      const double ta = seconds_since(t0);
      experts_ar = double(session_->last_pass().distinct_experts) / mi.n_layer;
      t0 = Clock::now();
      session_->eval_top(filled, 2);
      const double tc = seconds_since(t0);
      experts_commit = double(session_->last_pass().distinct_experts) / mi.n_layer;
      if (r < 0) continue;
      t_block.push_back(tb), t_ar.push_back(ta), t_commit.push_back(tc);
    }
    const double block_ms = summarize(t_block).median * 1e3, ar_ms = summarize(t_ar).median * 1e3;
    const double commit_ms = summarize(t_commit).median * 1e3;
    nlohmann::json j = record(fmt::format("block{}", B), "denoise", kBlockPrefix, 0, {});
    j["block_size"] = B;
    j["block_pass_logit_rows"] = B - 1;
    j["block_pass_ms"] = block_ms;
    j["commit_pass_ms"] = commit_ms;
    j["ar_step_ms"] = ar_ms;
    j["block_pass_vs_ar_step"] = ar_ms > 0 ? block_ms / ar_ms : 0.0;
    j["commit_pass_vs_ar_step"] = ar_ms > 0 ? commit_ms / ar_ms : 0.0;
    j["experts_per_layer_block"] = experts_block;
    j["experts_per_layer_commit"] = experts_commit;
    j["experts_per_layer_ar"] = experts_ar;
    j["block_pass_ms_samples"] = t_block;
    j["commit_pass_ms_samples"] = t_commit;
    j["ar_step_ms_samples"] = t_ar;
    for (auto* v : {&j["block_pass_ms_samples"], &j["commit_pass_ms_samples"], &j["ar_step_ms_samples"]})
      for (auto& x : *v) x = x.get<double>() * 1e3;
    report_(std::move(j));
  }

  bool can_denoise() const { return engine_->info().can_denoise && engine_->info().mask_token >= 0; }

 private:
  int warmups() const { return args_.no_warmup ? 0 : 1; }

  // Random ids below n_vocab, never the mask token; a different draw per repetition so no cache
  // or branch history carries over.
  std::vector<int32_t> random_tokens(int n, int rep) const {
    std::mt19937 rng(1234u + static_cast<unsigned>(rep + 1) * 7919u + static_cast<unsigned>(n));
    const int V = engine_->info().n_vocab, mask = engine_->info().mask_token;
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) do x = static_cast<int32_t>(rng() % static_cast<unsigned>(V)); while (x == mask);
    return t;
  }

  nlohmann::json record(const std::string& test, const std::string& mode, int n_prompt, int n_gen, const std::vector<double>& ts) const {
    nlohmann::json j = base_;
    const Summary s = summarize(ts);
    j["test"] = test;
    j["mode"] = mode;
    j["n_prompt"] = n_prompt;
    j["n_gen"] = n_gen;
    j["reps"] = args_.reps;
    if (!ts.empty()) {
      j["samples_ts"] = ts;
      j["avg_ts"] = s.mean;
      j["stddev_ts"] = s.stddev;
      j["median_ts"] = s.median;
    }
    j["peak_rss_bytes"] = peak_rss_bytes();  // of the process so far
    return j;
  }

  void progress(const std::string& test, int rep) const {
    if (args_.quiet) return;
    std::fprintf(stderr, "\rbench: %s t=%d %s %s        ", base_["model"].get<std::string>().c_str(), threads_, test.c_str(),
                 rep < 0 ? "warm-up" : fmt::format("rep {}/{}", rep + 1, args_.reps).c_str());
    std::fflush(stderr);
  }

  const BenchArgs& args_;
  std::function<void(nlohmann::json)> report_;
  int threads_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Session> session_;
  nlohmann::json base_;
};

// One markdown row per record, in llama-bench's columns plus the mode and what the test adds.
std::string markdown_row(const nlohmann::json& j) {
  std::string ts = "-", notes;
  if (j.contains("avg_ts")) ts = fmt::format("{:.2f} ± {:.2f}", j["avg_ts"].get<double>(), j["stddev_ts"].get<double>());
  if (j.contains("ttft_ms")) notes = fmt::format("ttft {:.1f} ms", j["ttft_ms"].get<double>());
  if (j.contains("passes_per_block"))
    notes = fmt::format("{:.2f} passes/{}, {:.2f} tok/{}", j["passes_per_block"].get<double>(), j["mode"] == "spec" ? "cycle" : "block",
                        j.value("tokens_per_cycle", j.value("tokens_per_block", 0.0)), j["mode"] == "spec" ? "cycle" : "block");
  if (j.contains("block_pass_ms"))
    notes = fmt::format("block pass {:.2f} ms = {:.2f}x, commit pass {:.2f} ms = {:.2f}x AR step {:.2f} ms; experts/layer {:.1f}, {:.1f} vs {:.1f}",
                        j["block_pass_ms"].get<double>(), j["block_pass_vs_ar_step"].get<double>(), j["commit_pass_ms"].get<double>(),
                        j["commit_pass_vs_ar_step"].get<double>(), j["ar_step_ms"].get<double>(), j["experts_per_layer_block"].get<double>(),
                        j["experts_per_layer_commit"].get<double>(),
                        j["experts_per_layer_ar"].get<double>());
  const std::string layout = j["layout"].get<std::string>();
  return fmt::format("| {} ({}L {}) | {} | {} | {} | {} | {} | {} | {} |", j["model"].get<std::string>(), j["n_layer"].get<int>(),
                     layout.substr(0, layout.find(' ')), j["weight_type"].get<std::string>(), human_bytes(j["size_bytes"].get<uint64_t>()),
                     j["threads"].get<int>(), j["mode"].get<std::string>(), j["test"].get<std::string>(), ts, notes);
}

}  // namespace

Runner add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* c = app.add_subcommand("bench", "measure prompt processing and generation speed (like llama-bench)");
  c->add_option("-m,--model", a->models, "GGUF model file(s)")->required()->delimiter(',');
  c->add_option("-p,--n-prompt", a->pp, "prompt lengths to process, e.g. 512,1024 (0: no pp test)")->delimiter(',');
  c->add_option("-n,--n-gen", a->tg, "numbers of tokens to generate, e.g. 128 (0: no tg test)")->delimiter(',');
  c->add_option("--mode", a->modes, "decoding modes for tg: ar, diffusion, spec (diffusion/spec add the block pass test)")
      ->delimiter(',')
      ->check(CLI::IsMember({"ar", "diffusion", "spec"}));
  c->add_option("-t,--threads", a->threads, "thread counts, e.g. 1,2 (default: all cores)")->delimiter(',');
  add_device_options(c, a->dev);
  add_load_options(c, a->load);
  c->add_flag("--drop-cache", a->drop_cache,
              "evict the model file from the page cache before each load (posix_fadvise DONTNEED; a cold start)");
  c->add_flag("--wait-prefault", a->wait_prefault, "wait for the background pre-fault to end before the first test");
  c->add_option("-r,--repetitions", a->reps, "timed repetitions per test")->check(CLI::Range(1, 1000));
  c->add_flag("--no-warmup", a->no_warmup, "skip the untimed warm-up run of each test");
  c->add_flag("--json", a->json, "print one JSON array of results instead of the markdown table");
  c->add_flag("-q,--quiet", a->quiet, "no progress on stderr");
  return [a] {
    const std::vector<int> pp = parse_counts("-p", a->pp, 0), tg = parse_counts("-n", a->tg, 0);
    std::vector<int> threads = parse_counts("-t", a->threads, 1);
    if (threads.empty()) threads.push_back(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    std::vector<std::string> modes = a->modes;
    std::sort(modes.begin(), modes.end());
    modes.erase(std::unique(modes.begin(), modes.end()), modes.end());
    const bool want_block = std::any_of(modes.begin(), modes.end(), [](auto& m) { return m != "ar"; });
    const int max_pp = *std::max_element(pp.begin(), pp.end()), max_tg = *std::max_element(tg.begin(), tg.end());
    if (max_pp == 0 && max_tg == 0 && !want_block) throw Error("nothing to measure: -p and -n are both 0 and no block test was asked for");
    // Context: the longest test, the block test's prefix growing by one AR step per repetition, and slack.
    const int n_ctx = std::max({max_pp + 1, max_tg + 1, kBlockPrefix + 96}) + 8;  // the block test: prefix, step, block
    for (const auto& m : a->models)
      if (!std::filesystem::is_regular_file(m)) throw Error(fmt::format("model file not found: {}", m));

    nlohmann::json all = nlohmann::json::array();
    bool header = false;
    auto report = [&](nlohmann::json j) {
      if (!a->quiet) std::fprintf(stderr, "\r\x1b[K");
      if (!a->json) {
        if (!header) {
          std::printf("| model | type | size | threads | mode | test | t/s | notes |\n|---|---|---|---:|---|---|---:|---|\n");
          header = true;
        }
        std::printf("%s\n", markdown_row(j).c_str());
        std::fflush(stdout);
      }
      all.push_back(std::move(j));
    };
    for (const auto& m : a->models)
      for (int t : threads) {
        ModelBench mb(m, t, *a, n_ctx, report);
        if (want_block && !mb.can_denoise())
          throw Error(fmt::format("--mode diffusion/spec needs a model with the reverse in-block GDN path and a mask token "
                                  "(official layout); {} lacks them: use --mode ar",
                                  m));
        for (int p : pp)
          if (p > 0) mb.prompt_processing(p);
        for (int n : tg)
          if (n > 0)
            for (const auto& mode : modes) mb.generation(n, mode);
        if (want_block) mb.block_pass();
      }
    if (a->json) std::printf("%s\n", all.dump(1).c_str());
    else std::printf("\npeak RSS %s\n", human_bytes(static_cast<uint64_t>(peak_rss_bytes())).c_str());
    return 0;
  };
}

}  // namespace clover::cli
