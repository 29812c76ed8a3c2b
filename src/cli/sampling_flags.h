// The sampling flags of `clover run` and `clover serve`, with llama.cpp's names and ranges (the
// ranges the server accepts per request). -s/--seed -1 draws a random seed.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <random>

#include "cli/ranges.h"
#include "clover/clover.h"

namespace clover::cli {

inline void add_sampling_options(CLI::App* c, SamplingOptions& s, int64_t& seed) {
  c->add_option("--temp", s.temperature, "temperature (0: greedy)")->check(in_range(0, 100))->capture_default_str();
  c->add_option("--top-k", s.top_k, "top-k (0: off)")->check(in_range(0, 1e9))->capture_default_str();
  c->add_option("--top-p", s.top_p, "top-p (1: off)")->check(in_range(0, 1))->capture_default_str();
  c->add_option("--min-p", s.min_p, "min-p (0: off)")->check(in_range(0, 1))->capture_default_str();
  c->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty (0: off)")->check(in_range(-2, 2))->capture_default_str();
  c->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty (0: off)")->check(in_range(-2, 2))->capture_default_str();
  c->add_option("--repeat-penalty", s.repeat_penalty, "repeat penalty (1: off)")->check(in_range(0, 10, /*lo_open=*/true))->capture_default_str();
  c->add_option("--repeat-last-n", s.repeat_last_n, "tokens the repeat penalty looks back on (0: off, -1: all)")
      ->check(in_range(-1, 1e9))->capture_default_str();
  c->add_option("-s,--seed", seed, "sampling seed (-1: random)")->check(in_range(-1, 9.2e18))->capture_default_str();
}

// The seed a run uses: the flag's, or a random one for -1.
inline uint64_t resolve_seed(int64_t seed) { return seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}(); }

}  // namespace clover::cli
