// The CPU executor's scratch (private to src/backend/cpu): sized once for the largest batch, so
// nothing here is allocated per token.
#pragma once
#include <vector>

#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/experts.h"
#include "backend/cpu/scratch.h"
#include "backend/routing.h"
#include "kernels/attention.h"

namespace clover::backend::cpu {

struct CpuExecutor::Scratch {
  Scratch(const model::HParams& hp, ThreadPool& pool, int B);

  Mat x, h, y;             // residual stream, normed input, layer output: [B][n_embd]
  kernels::ActRows acts;   // activation rows converted for one matmul

  // attention
  Mat qg, k, v, q, attn;           // projections, roped queries [B][n_head*hd], attention output
  std::vector<kernels::AttentionScratch> attn_scratch;  // per thread; sized by head_dim, not n_ctx

  // gated DeltaNet
  Mat qkv, conv_out, z, beta, alpha, o;  // conv_out: silu(conv(qkv)), then q, k L2-normalised
  GdnLayerState gdn_copy;               // a denoising pass scans from a copy of the committed state
  Mat rev_beta, rev_alpha;              // reverse in-block path: [B][H_v]

  // mixture of experts
  Mat router;                       // [B][n_expert] logits, then probabilities
  std::vector<int32_t> chosen;      // [B][k] expert ids
  std::vector<float> chosen_w;      // [B][k] renormalised weights
  ExpertGroups groups;              // routed rows by expert
  std::vector<uint8_t> seen;        // distinct-expert count scratch
  std::vector<ExpertWork> works;    // the experts with rows in this pass
  CpuExpertRunner experts;
  std::vector<float> shared_gamma;  // [B]
};

// A stacked pass (stacked_pass.cpp): the stacked rows of every sequence and the projections the
// sequences' mixers share.
struct CpuExecutor::StackScratch {
  Mat x, h, y;  // stacked residual stream, normed input, mixer output: [max_batch][n_embd]
  struct Projection {
    kernels::MatRef w;
    Mat out;  // [max_batch][w.rows]
  };
  std::vector<Projection> pre;  // input-side projections of the current layer
  size_t n_pre = 0;
  kernels::MatRef deferred;     // the current layer's output projection
  Mat deferred_in;              // its stacked input: [max_batch][deferred.cols]
  bool deferred_seen = false;   // the current sequence's mixer handed its output projection over
  std::vector<bool> deferred_rows;  // per sequence: deferred_seen
  int row0 = 0;                 // first stacked row of the current sequence
  std::vector<float> logits;    // [rows with logits][n_vocab]
};

}  // namespace clover::backend::cpu
