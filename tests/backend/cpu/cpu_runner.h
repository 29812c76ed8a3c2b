// Test shorthand over the CPU executor: one call per pass, in the shapes the tests read best.
#pragma once
#include <span>
#include <vector>

#include "backend/cpu/cpu_executor.h"

namespace clover::testing {

using backend::LogitRows;
using backend::Pass;
using backend::PassKind;
using backend::cpu::CpuSequence;

struct CpuRunner {
  CpuRunner(const model::Model& m, int threads, int max_batch = 256) : exec(m, {threads, max_batch}) {}
  backend::PassStats causal(backend::Sequence& s, std::span<const int32_t> tokens, LogitRows rows, float* logits) {
    Pass p = Pass::causal(s, tokens, rows, logits);
    exec.run(p);
    return p.stats;
  }
  backend::PassStats denoise(backend::Sequence& s, std::span<const int32_t> block, float* logits, bool reverse_path = true,
                             std::span<const int32_t> rows = {}) {
    Pass p = Pass::denoise(s, block, rows, logits, reverse_path);
    exec.run(p);
    return p.stats;
  }
  void multi(std::vector<Pass>& passes) { exec.run(passes); }
  // A PassFn for the decoders.
  auto pass_fn() {
    return [this](Pass& p) { exec.run(p); };
  }
  backend::cpu::CpuExecutor exec;
};

}  // namespace clover::testing
