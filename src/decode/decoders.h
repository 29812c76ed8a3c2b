// The decoding modes of CLOVER-SPEC section 2, on top of the execution boundary (backend/executor.h:
// they run on any backend):
//   ar        one causal pass per token;
//   diffusion block diffusion: denoise a block of B positions, fill every masked position whose
//             confidence reaches tau (at least the most confident one), repeat, then one causal
//             commit pass writes the block to the cache and yields the next pending token;
//   spec      guess-then-verify: one denoising pass drafts the whole block, one causal pass
//             verifies it, the longest agreeing run is kept (lossless against AR).
// All three keep one invariant: the sequence state holds exactly the tokens emitted so far
// (prompt + output), so a conversation's cache is reusable in any mode.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/executor.h"
#include "sampling/sampler.h"

namespace clover::decode {

// Receives each output token once it is final, in order. Returns false to stop (an end token, a
// stop string, a cancelled request); the decoder then leaves the state holding the tokens
// emitted so far, including that last one.
using Emit = std::function<bool(int32_t token)>;

// A block as it fills in (for `clover run --show-blocks` and the server's pass events): shown after
// every denoising pass, and in spec mode once more after the verify pass.
struct BlockView {
  const std::vector<int32_t>& tokens;    // the block; undecided positions hold the mask token
  const std::vector<bool>& decided;
  const std::vector<float>& confidence;  // probability of each decided token when it was chosen; 0: not known
  int block = 0;                         // 0 for the generation's first block
  int pass = 0;                          // 1 for the block's first denoising pass
  int accepted = -1;                     // spec, after verifying: drafts 1..accepted agree with the causal pass
};
using BlockObserver = std::function<void(const BlockView&)>;

// One output token's log-probability and its best alternatives (Options::logprobs).
struct TokenLogprobs {
  int32_t token = -1;
  double logprob = 0.0;
  std::vector<sampling::TokenLogprob> top;
};

struct Options {
  int max_tokens = 128;      // tokens to emit at most (the pending token counts)
  int block_size = 32;       // B
  double threshold = 0.95;   // tau, compared with each confidence as a probability
  bool reverse_path = true;  // use the reverse in-block GDN path in denoising passes
  int32_t mask_token = -1;
  BlockObserver observer;    // optional
  // OpenAI logprobs: >= 0 asks for each output token's raw log-probability in the row it was chosen
  // from (the causal row in AR mode and for pending tokens; the denoising row for a token a
  // diffusion pass decided; the verifier's row for an accepted spec draft) and this many
  // alternatives; on_logprobs gets them just before the token is emitted, except for the first
  // pending token (the caller chose it). Makes the sampled passes read back whole rows.
  int logprobs = -1;
  std::function<void(const TokenLogprobs&)> on_logprobs;
};

struct Stats {
  int causal_passes = 0;        // commit / verify / replay / AR passes
  int denoise_passes = 0;
  int blocks = 0;               // diffusion blocks or spec cycles completed
  int denoised_tokens = 0;      // tokens decided by denoising passes (diffusion) or accepted drafts (spec)
  double denoise_seconds = 0.0;
  double causal_seconds = 0.0;
};

// Runs one pass of the decoder's sequence (the engine shares it with other sessions' passes:
// continuous batching; a test runs it on an executor directly).
using PassFn = std::function<void(backend::Pass& pass)>;

// What a decoder works on. `committed` is the list of tokens in the sequence; decoders append
// what they commit to it.
struct Context {
  PassFn run_pass;
  backend::Sequence& seq;
  sampling::Sampler& sampler;
  std::vector<int32_t>& committed;
  int n_vocab;
};

// Each decoder starts from the pending token (decided from the last prompt logits, not yet in the
// state) and returns when it stopped: by Emit, or after max_tokens.
void decode_ar(Context& c, int32_t pending, const Options& o, const Emit& emit, Stats& stats);
void decode_diffusion(Context& c, int32_t pending, const Options& o, const Emit& emit, Stats& stats);
void decode_spec(Context& c, int32_t pending, const Options& o, const Emit& emit, Stats& stats);

}  // namespace clover::decode
