// Greedy decoding on any executor (AR, guess-then-verify, diffusion) for the decoder tests of the
// Vulkan backend: the emitted tokens, the final sequence state and the decoder's statistics.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/executor.h"
#include "decode/decoders.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace clover {

// The decoders on the Vulkan executor: greedy, from a prompt; returns the emitted tokens.
struct DecodeRun {
  std::vector<int32_t> out;
  std::vector<uint8_t> state;
  decode::Stats stats;
};

inline DecodeRun decode_on(backend::Executor& ex, const model::Model& m, const std::vector<int32_t>& prompt, int n,
                    const std::string& mode, int block = 32, double tau = 0.95) {
  const model::HParams& hp = m.hp();
  auto seq = ex.new_sequence(static_cast<int>(prompt.size()) + n + 2 * block, {});
  sampling::SamplingParams sp;
  sp.temperature = 0;
  sampling::Sampler sampler(sp, hp.n_vocab);
  std::vector<float> logits(hp.n_vocab);
  backend::Pass p = backend::Pass::causal(*seq, prompt, backend::LogitRows::Last, logits.data());
  ex.run(p);
  std::vector<int32_t> committed = prompt;
  DecodeRun r;
  decode::Context ctx{[&](backend::Pass& q) { ex.run(q); }, *seq, sampler, committed, hp.n_vocab};
  decode::Options o;
  o.max_tokens = n;
  o.block_size = block;
  o.threshold = tau;
  o.mask_token = hp.mask_token;
  const int32_t pending = sampler.sample(logits.data(), committed).token;
  auto emit = [&](int32_t t) {
    r.out.push_back(t);
    return true;
  };
  if (mode == "ar") decode::decode_ar(ctx, pending, o, emit, r.stats);
  if (mode == "spec") decode::decode_spec(ctx, pending, o, emit, r.stats);
  if (mode == "diffusion") decode::decode_diffusion(ctx, pending, o, emit, r.stats);
  EXPECT_EQ(seq->n_past(), static_cast<int>(prompt.size() + r.out.size())) << mode;
  r.state = seq->committed_state();
  return r;
}

}  // namespace clover
