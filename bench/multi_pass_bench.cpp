// Continuous batching at the model level: N sequences each taking one AR decode step, as N
// separate passes (Forward::causal) and as one multi-sequence pass (Forward::multi), alternated
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

#include "model/forward.h"
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
    ThreadPool pool(threads);
    model::Forward f(*m, pool, std::max(prefix, n_seq));
    std::mt19937 rng(1);
    std::vector<std::unique_ptr<model::SequenceState>> st;
    std::vector<std::vector<float>> logits(n_seq, std::vector<float>(hp.n_vocab));
    std::vector<int32_t> toks(n_seq);
    for (int i = 0; i < n_seq; ++i) {
      st.push_back(std::make_unique<model::SequenceState>(hp, prefix + 2 * reps + 8));
      std::vector<int32_t> p(prefix);
      for (auto& t : p) t = static_cast<int32_t>(rng() % std::min(hp.n_vocab, 500));
      f.causal(*st[i], p, model::LogitRows::Last, logits[i].data());
      toks[i] = static_cast<int32_t>(rng() % std::min(hp.n_vocab, 500));
    }
    std::vector<double> t_sep, t_multi;
    for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
      double t0 = now();
      for (int i = 0; i < n_seq; ++i)
        f.causal(*st[i], std::span<const int32_t>(&toks[i], 1), model::LogitRows::Last, logits[i].data());
      const double a = now() - t0;
      std::vector<model::SeqPass> passes;
      for (int i = 0; i < n_seq; ++i)
        passes.push_back(model::SeqPass{st[i].get(), std::span<const int32_t>(&toks[i], 1), model::PassKind::Causal,
                                        model::LogitRows::Last, logits[i].data(), true});
      t0 = now();
      f.multi(passes);
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
