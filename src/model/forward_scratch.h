// Scratch memory of the forward pass (private to src/model/forward*.cpp). Sized once for the
// largest batch; nothing here is allocated per token.
#pragma once
#include <initializer_list>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/forward.h"

namespace clover::model {

// A row-major [rows][cols] float matrix that keeps its storage.
struct Mat {
  std::vector<float> v;
  int64_t cols = 0;
  void resize(int64_t rows, int64_t c) {
    cols = c;
    v.assign(static_cast<size_t>(rows * c), 0.f);
  }
  float* row(int64_t r) { return v.data() + r * cols; }
  const float* row(int64_t r) const { return v.data() + r * cols; }
};

// One input matrix converted for every activation type its consumers need (files may mix weight
// types per tensor). prepare() converts, get() is then safe to call from any thread.
class ActSet {
 public:
  void reset(const float* x, int64_t rows, int64_t cols, int64_t stride) {
    x_ = x, rows_ = rows, cols_ = cols, stride_ = stride;
    for (bool& r : ready_) r = false;
  }
  void prepare(std::initializer_list<DType> weight_types) {
    for (DType w : weight_types) {
      const int i = index(kernels::activation_type(w));
      if (!ready_[i]) sets_[i].convert(x_, rows_, cols_, stride_, kernels::activation_type(w)), ready_[i] = true;
    }
  }
  const kernels::ActRows& get(DType weight_type) const { return sets_[index(kernels::activation_type(weight_type))]; }

 private:
  static int index(DType a) {
    return a == DType::F32 ? 0 : a == DType::F16 ? 1 : a == DType::BF16 ? 2 : a == DType::Q8_0 ? 3 : 4;  // 4: Q8_K
  }
  kernels::ActRows sets_[5];
  bool ready_[5] = {};
  const float* x_ = nullptr;
  int64_t rows_ = 0, cols_ = 0, stride_ = 0;
};

// One unit of MoE work: output rows [o_begin, o_end) of one expert (or of the shared expert) for
// the activation rows routed to it.
struct ExpertTask {
  kernels::MatRef gate, up, down;
  const int32_t* tokens = nullptr;  // activation rows of the layer input (phase 1)
  int32_t n = 0;                    // rows routed to this expert
  int32_t out_row = 0;              // first row of this expert in the routed-row buffers
  int64_t o_begin = 0, o_end = 0;
};

struct Forward::Scratch {
  Mat x, h, y;             // residual stream, normed input, layer output: [B][n_embd]
  kernels::ActRows acts;   // activation rows converted for one matmul
  kernels::ActRows acts2;  // a second set (when two weight types read the same input)
  ActSet in_acts;          // the MoE input, per activation type

  // attention
  Mat qg, k, v, q, attn;           // projections, roped queries [B][n_head*hd], attention output
  std::vector<kernels::AttentionScratch> attn_scratch;  // per thread; sized by head_dim, not n_ctx

  // gated DeltaNet
  Mat qkv, conv, z, beta, alpha, o;
  GdnLayerState gdn_copy;               // a denoising pass scans from a copy of the committed state
  Mat rev_beta, rev_alpha;              // reverse in-block path: [B][H_v]

  // mixture of experts
  Mat router;                       // [B][n_expert] logits, then probabilities
  std::vector<int32_t> chosen;      // [B][k] expert ids
  std::vector<float> chosen_w;      // [B][k] renormalised weights
  std::vector<int32_t> expert_count, expert_first;  // per expert: routed rows, first row in ffn buffers
  std::vector<int32_t> routed_token;  // per routed row: its token (rows grouped by expert)
  std::vector<int32_t> row_of;        // [B][k]: routed row of (token, slot)
  std::vector<int32_t> iota;          // 0, 1, 2, ...
  Mat ffn_gate, ffn_up, ffn_down;     // per routed row (+ T shared rows): [R][n_ff], [R][n_embd]
  std::vector<float> shared_gamma;    // [B]
  std::vector<ExpertTask> tasks;
};

}  // namespace clover::model
