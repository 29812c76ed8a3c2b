// Continuous batching at the model level: N sequences each taking one AR decode step, as N
// separate passes and as one stacked pass (Executor::run with N passes), alternated
// on the same states; docs/server.md. Prints a markdown row.
//
// usage: multi_pass_bench MODEL.gguf [--seqs N] [--prefix P] [--reps R] [-t THREADS]
//
// Reported: median time of the N separate steps and of the one batched step, the speedup, and
// the decode throughput of both (tokens/s over the N sequences).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "args.h"
#include "timing.h"

using namespace clover;

namespace {
using bench::median;
using bench::now;
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--seqs N] [--prefix P] [--reps R] [-t THREADS]\n", argv[0]);
    return 2;
  }
  int n_seq = 4, prefix = 64, reps = 9, threads = 1;
  if (!bench::parse_int_flags(argc, argv, 2, {{"--seqs", &n_seq}, {"--prefix", &prefix}, {"--reps", &reps}, {"-t", &threads}})) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--seqs N] [--prefix P] [--reps R] [-t THREADS]\n", argv[0]);
    return 2;
  }
  try {
    auto m = model::Model::load(argv[1]);
    const model::HParams& hp = m->hp();
    backend::ExecutorOptions eo;
    eo.n_threads = threads;
    eo.max_batch = std::max(prefix, n_seq);
    const auto exec = backend::make_executor(*m, eo);
    std::mt19937 rng(1);
    std::vector<std::unique_ptr<backend::Sequence>> st;
    std::vector<std::vector<float>> logits(n_seq, std::vector<float>(hp.n_vocab));
    std::vector<int32_t> toks(n_seq);
    for (int i = 0; i < n_seq; ++i) {
      st.push_back(exec->new_sequence(prefix + 2 * reps + 8, {}));
      std::vector<int32_t> p(prefix);
      for (auto& t : p) t = static_cast<int32_t>(rng() % std::min(hp.n_vocab, 500));
      backend::Pass pass = backend::Pass::causal(*st[i], p, backend::LogitRows::Last, logits[i].data());
      exec->run(pass);
      toks[i] = static_cast<int32_t>(rng() % std::min(hp.n_vocab, 500));
    }
    std::vector<double> t_sep, t_multi;
    for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
      double t0 = now();
      for (int i = 0; i < n_seq; ++i) {
        backend::Pass pass = backend::Pass::causal(*st[i], std::span<const int32_t>(&toks[i], 1), backend::LogitRows::Last, logits[i].data());
        exec->run(pass);
      }
      const double a = now() - t0;
      std::vector<backend::Pass> passes;
      for (int i = 0; i < n_seq; ++i)
        passes.push_back(backend::Pass::causal(*st[i], std::span<const int32_t>(&toks[i], 1), backend::LogitRows::Last, logits[i].data()));
      t0 = now();
      exec->run(passes);
      const double b = now() - t0;
      if (r > 0) t_sep.push_back(a), t_multi.push_back(b);
    }
    const double sep = median(t_sep), mul = median(t_multi);
    std::printf("| %s | %d | %d | %.2f ms | %.2f ms | %.2fx | %.1f -> %.1f tokens/s |\n", argv[1], threads, n_seq, sep * 1e3,
                mul * 1e3, sep / mul, n_seq / sep, n_seq / mul);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
