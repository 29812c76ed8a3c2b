// The CPU backend: the Clover forward pass on the host, in llama.cpp's summation orders.
//
// One pass runs a batch of T tokens of one sequence through every layer (prefill, a decode step,
// or a block of a decoding mode), or the stacked rows of several sequences (stacked_pass.cpp).
// Batching amortises the weight reads: every weight row read from memory is used for all T
// tokens. All scratch memory is sized once for the largest batch, so a decode step allocates
// nothing.
//
//   x = embed(tokens)
//   for each layer:  x += mixer(rms(x))       mixer = gated DeltaNet (gdn.cpp) or gated attention (attention.cpp)
//                    x += moe(rms(x))         256 routed experts (top 8) + 1 gated shared expert (moe.cpp)
//   logits = head(rms(x))
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "backend/cpu/sequence.h"
#include "backend/executor.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "runtime/thread_pool.h"

namespace clover::backend::cpu {

class CpuExecutor final : public Executor {
 public:
  struct Options {
    int n_threads = 0;    // 0: all cores
    int max_batch = 256;  // the largest internal pass; longer causal passes are chunked
    // Layers [0, n_layers) only (-1: every layer): the front part of a layer split
    // (backend/layer_split.h), run by run_front(); its sequences hold the state of those layers.
    int n_layers = -1;
  };
  CpuExecutor(const model::Model& model, const Options& opts);
  ~CpuExecutor() override;

  std::string_view name() const override { return "cpu"; }
  const model::Model& model() const override { return model_; }
  bool reads_host_weights() const override { return true; }
  int max_batch() const override { return max_batch_; }
  int n_threads() const override { return pool_.size(); }
  std::unique_ptr<Sequence> new_sequence(int n_ctx, KvTypes types) override;
  void run(std::span<Pass> passes) override;
  using Executor::run;
  void trace_routing(std::FILE* f) override { routing_trace_ = f; }
  // The front part of a layer split: the passes through the embedding and layers [0, n_layers),
  // no head; the rows after the last of them, stacked in pass order, go to hidden ([N][n_embd]).
  // Causal passes commit their tokens (the sequences of these layers advance). The passes' rows,
  // logits and selection are ignored; each pass books the work of these layers in its stats.
  void run_front(std::span<Pass> passes, float* hidden);
  int n_layers() const { return n_layers_; }

 private:
  struct Scratch;
  struct StackScratch;
  // Where the MoE layer books the statistics of the rows [row_begin, row_end) of the current pass.
  struct StatsSegment {
    int row_begin, row_end;
    PassStats* stats;
  };

  void check(const Pass& p) const;
  void run_checked(std::span<Pass> passes);  // run() after the checks and the selection's set-up
  void run_causal(Pass& p);
  void run_denoise(Pass& p);
  void run_stacked(std::span<Pass> passes);  // stacked_pass.cpp
  // One chunk of one sequence through every layer; the head for `rows` (or the `selected` block rows).
  void run_chunk(CpuSequence& seq, std::span<const int32_t> tokens, LogitRows rows, float* logits, PassKind kind,
                 std::span<const int32_t> selected = {});
  void attention_layer(int il, CpuSequence& seq, int T, PassKind kind);
  void gdn_layer(int il, CpuSequence& seq, int T, PassKind kind);
  // The reverse in-block path of value head h over a denoising block, added to its output rows.
  void gdn_reverse_head(const model::GdnWeights& W, int64_t h, int T);
  void moe_layer(int il, int T);
  void head(int T, LogitRows rows, float* logits, std::span<const int32_t> selected);
  void linear(const kernels::MatRef& w, const float* x, int T, int64_t x_stride, float* y);
  // Several projections of one input in one parallel region with one activation conversion (a
  // decode step pays per region: the q/k/v or qkv/gate/beta/alpha of a layer are one). Each row
  // is computed as linear() computes it, so the bits are linear()'s.
  struct Projection {
    const kernels::MatRef* w;
    float* y;
  };
  void linears(std::span<const Projection> ps, const float* x, int T, int64_t x_stride);
  // During a stacked pass: serves a mixer's projection from the stacked result (true), or defers it.
  bool stacked_linear(const kernels::MatRef& w, const float* x, int T, int64_t x_stride, float* y);

  const model::Model& model_;
  const model::HParams& hp_;
  ThreadPool pool_;
  int max_batch_;
  int n_layers_;                  // layers [0, n_layers_) run here
  float* hidden_out_ = nullptr;   // run_front: the hidden rows go here instead of the head
  int64_t hidden_row0_ = 0;       // the current chunk's first row in hidden_out_
  std::unique_ptr<Scratch> s_;
  // Per layer (empty for attention layers): the GDN conv weights tap-major, [K][C], for
  // kernels::conv_silu (the file holds them [C][K]; 128 KiB a layer at Clover's size).
  std::vector<std::vector<float>> conv_taps_;
  std::vector<StatsSegment> segments_;  // of the pass running now
  std::vector<std::vector<float>> select_rows_;  // per pass of a stack: logits rows only the selection reads
  std::FILE* routing_trace_ = nullptr;
  int chunk_pos0_ = 0;  // position of the chunk's first token (for the trace)
  bool reverse_path_ = true;
  std::unique_ptr<StackScratch> stack_;
  bool stack_active_ = false;  // the mixer of one sequence of a stacked pass is running
};

}  // namespace clover::backend::cpu
