// The Clover forward pass on the CPU.
//
// One pass runs a batch of T tokens of one sequence through every layer (prefill, a decode step,
// or a block of a decoding mode). Batching amortises the weight reads: every weight row read from
// memory is used for all T tokens. All scratch memory is sized once for the largest batch, so a
// decode step allocates nothing.
//
//   x = embed(tokens)
//   for each layer:  x += mixer(rms(x))       mixer = gated DeltaNet or gated attention
//                    x += moe(rms(x))         256 routed experts (top 8) + 1 gated shared expert
//   logits = head(rms(x))
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "model/model.h"
#include "model/state.h"
#include "runtime/thread_pool.h"

namespace clover::model {

// Which positions of a pass need logits.
enum class LogitRows { None, Last, All };

// How a pass treats the batch (see CLOVER-SPEC section 2).
enum class PassKind {
  Causal,   // AR prefill/decode, commit and verify passes: causal, appends to the state
  Denoise,  // a block against the committed state: bidirectional inside the block, state unchanged
};

// One sequence's part of a multi-sequence pass (Forward::multi, src/model/forward_multi.cpp).
struct SeqPass {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  PassKind kind = PassKind::Causal;
  LogitRows rows = LogitRows::Last;  // a Denoise pass writes every row, or those of denoise_rows
  float* logits = nullptr;           // [rows][n_vocab]
  bool reverse_path = true;          // Denoise only
  // Denoise only: the block positions (ascending) whose logits are needed; the other rows of
  // `logits` are unspecified (scratch). Empty: every position. Positions already decided need none, so
  // later passes of a block cost less in the LM head (its largest matmul).
  std::span<const int32_t> denoise_rows = {};
};

struct PassStats {
  int64_t tokens = 0;
  int64_t expert_rows = 0;      // (token, expert) pairs computed
  int64_t distinct_experts = 0;  // summed over layers
};

class Forward {
 public:
  // max_batch: the largest number of tokens one internal pass handles; longer inputs are split
  // into chunks of this size (bounding activation memory independently of prompt length).
  Forward(const Model& model, ThreadPool& pool, int max_batch = 256);
  ~Forward();

  // Runs `tokens` causally after the state's committed tokens and appends them to the state.
  // Logits (n_vocab floats per requested row) go to `logits`: one row for Last, T rows for All.
  // Throws ModelError when the tokens do not fit in the state's context or are out of range.
  void causal(SequenceState& st, std::span<const int32_t> tokens, LogitRows rows, float* logits);

  // The denoising pass (CLOVER-SPEC 2 and 3.3): the block (pending token, then committed tokens or
  // the mask token) at positions n_past .. n_past+B-1. Attention sees the committed prefix and the
  // whole block; GDN layers scan forward from a copy of the committed state and, with
  // `reverse_path`, add the reverse in-block path. Writes B rows of logits. The committed state is
  // not changed (K/V rows at and beyond n_past are scratch). `rows` (ascending block positions):
  // only those rows of `logits` (each at its own row) get logits, the others are used as scratch;
  // empty: all B rows.
  void denoise(SequenceState& st, std::span<const int32_t> block, float* logits, bool reverse_path = true,
               std::span<const int32_t> rows = {});

  // Several sequences in one pass (continuous batching): the matmuls run over the stacked rows of
  // all sequences, attention and the GDN recurrence per sequence, so every sequence gets exactly
  // the logits and state it would get alone. The tokens of all passes together must fit in
  // max_batch; each pass is checked like causal()/denoise() (ModelError before anything runs).
  void multi(std::span<const SeqPass> passes);
  int max_batch() const { return max_batch_; }

  const PassStats& last_stats() const { return stats_; }

  // Debugging aid: when set, every routing decision is written as one line
  // "layer position e1,e2,...,ek margin" where margin = p(k-th chosen) - p(best not chosen): a
  // margin near zero is a near-tie that rounding elsewhere can flip.
  void trace_routing(std::FILE* f) { routing_trace_ = f; }
  const Model& model() const { return model_; }

 private:
  struct Scratch;
  void check_tokens(const SequenceState& st, std::span<const int32_t> tokens) const;
  void check_rows(size_t block_size, std::span<const int32_t> rows) const;
  void run_chunk(SequenceState& st, std::span<const int32_t> tokens, LogitRows rows, float* logits, PassKind kind,
                 std::span<const int32_t> selected = {});
  void attention_layer(int il, SequenceState& st, int T, PassKind kind);
  void gdn_layer(int il, SequenceState& st, int T, PassKind kind);
  void gdn_reverse_path(const GdnWeights& W, int T);
  void moe_layer(int il, int T);
  void head(int T, LogitRows rows, float* logits, std::span<const int32_t> selected);
  void linear(const kernels::MatRef& w, const float* x, int T, int64_t x_stride, float* y);
  // During multi(): serves a mixer's projection from the stacked result (true), or defers it.
  struct MultiScratch;
  bool multi_linear(const kernels::MatRef& w, const float* x, int T, int64_t x_stride, float* y);

  const Model& model_;
  const HParams& hp_;
  ThreadPool& pool_;
  int max_batch_;
  std::unique_ptr<Scratch> s_;
  PassStats stats_;
  std::FILE* routing_trace_ = nullptr;
  int chunk_pos0_ = 0;  // position of the chunk's first token (for the trace)
  bool reverse_path_ = true;
  // shared_ptr: deletes the (here incomplete) type without forward.cpp knowing it.
  std::shared_ptr<MultiScratch> multi_;
  bool multi_active_ = false;  // the mixer of one sequence of a multi() pass is running
};

}  // namespace clover::model
