// Cost of one denoising pass of a block against one AR decode step, on the same model and state
// (issue 4's benchmark; docs/decoding.md). Prints a markdown row.
//
// usage: block_pass_bench MODEL.gguf [--prefix 64] [--block 32] [--rows N] [--reps 5] [-t THREADS]
//
// Reported: median time of an AR step (one token after the prefix), of a denoising pass over
// [pending, 31 masks] with logits for N outputs (default B-1: the decoder's first pass of a block,
// where outputs 0..B-2 predict the B-1 masks; later passes ask only for the still-masked ones),
// and of the commit pass over the 32 block tokens; distinct experts per
// layer touched by each; the median process CPU time of the AR step and the denoising pass; and the tokens per denoising pass at which diffusion breaks even with AR:
//   a block costs (B-1)/k denoising passes + 1 commit pass for B tokens, AR B steps, so
//   k* = (B-1) t_denoise / (B t_ar - t_commit).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "args.h"
#include "timing.h"

using namespace clover;

namespace {
using bench::median;
using bench::now;
// CPU seconds of the whole process: on a shared machine the wall time of a single-threaded run
// swings with the load; its CPU time is the steadier figure.
using bench::cpu_now;
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--prefix N] [--block B] [--rows N] [--reps R] [-t THREADS]\n", argv[0]);
    return 2;
  }
  int prefix = 64, B = 32, reps = 5, threads = 1, n_rows = -1;
  if (!bench::parse_int_flags(argc, argv, 2,
                              {{"--prefix", &prefix}, {"--block", &B}, {"--rows", &n_rows}, {"--reps", &reps}, {"-t", &threads}})) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--prefix N] [--block B] [--rows N] [--reps R] [-t THREADS]\n", argv[0]);
    return 2;
  }
  try {
    auto m = model::Model::load(argv[1]);
    const model::HParams& hp = m->hp();
    backend::ExecutorOptions eo;
    eo.n_threads = threads;
    eo.max_batch = std::max(B, 64);
    const auto exec = backend::make_executor(*m, eo);
    // One pass; returns its distinct experts per layer.
    auto run = [&](backend::Pass p) {
      exec->run(p);
      return double(p.stats.distinct_experts) / hp.n_layer;
    };
    std::mt19937 rng(1);
    std::vector<int32_t> toks(prefix + B);
    for (auto& t : toks) t = static_cast<int32_t>(rng() % std::min(hp.n_vocab, 500));
    std::vector<float> logits(static_cast<size_t>(B) * hp.n_vocab);
    const auto st = exec->new_sequence(prefix + B + 8, {});
    run(backend::Pass::causal(*st, std::span<const int32_t>(toks.data(), prefix), backend::LogitRows::Last, logits.data()));
    const auto snapshot = st->new_snapshot();
    st->save(*snapshot);

    std::vector<double> t_ar, t_den, t_commit, c_ar, c_den;
    double experts_ar = 0, experts_den = 0, experts_commit = 0;
    std::vector<int32_t> block(B, hp.mask_token >= 0 ? hp.mask_token : 0);
    block[0] = toks[prefix];
    if (n_rows < 0) n_rows = B - 1;
    if (n_rows < 1 || n_rows > B) throw std::runtime_error("--rows must be 1 .. the block size");
    std::vector<int32_t> rows(n_rows);
    for (int i = 0; i < n_rows; ++i) rows[i] = i;
    for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
      double t0 = now(), u0 = cpu_now();
      experts_ar = run(backend::Pass::causal(*st, std::span<const int32_t>(&toks[prefix], 1), backend::LogitRows::Last, logits.data()));
      const double a = now() - t0, ua = cpu_now() - u0;
      st->restore(*snapshot);
      double d = 0, ud = 0;
      if (hp.has_reverse_path) {
        t0 = now(), u0 = cpu_now();
        experts_den = run(backend::Pass::denoise(*st, block, rows, logits.data(), true));
        d = now() - t0, ud = cpu_now() - u0;
      }
      t0 = now();
      experts_commit = run(backend::Pass::causal(*st, std::span<const int32_t>(&toks[prefix], B), backend::LogitRows::Last, logits.data()));
      const double c = now() - t0;
      st->restore(*snapshot);
      if (r > 0) t_ar.push_back(a), t_den.push_back(d), t_commit.push_back(c), c_ar.push_back(ua), c_den.push_back(ud);
    }
    const double ar = median(t_ar), den = median(t_den), com = median(t_commit);
    const double breakeven = (B - 1) * den / (B * ar - com);
    const double cpu_ar = median(c_ar), cpu_den = median(c_den);
    std::printf("| %s | %d | %.2f ms | %.2f ms (%.2fx, %d rows of logits) | %.2f ms | %.1f / %.1f / %.1f | %.2f / %.2f ms (%.2fx) | %s |\n",
                argv[1], threads, ar * 1e3, den * 1e3, den / ar, n_rows, com * 1e3, experts_ar, experts_den, experts_commit, cpu_ar * 1e3, cpu_den * 1e3,
                cpu_den / cpu_ar,
                B * ar > com ? (std::to_string(breakeven).substr(0, 5) + " tokens/pass").c_str() : "never (commit costs more than B AR steps)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
