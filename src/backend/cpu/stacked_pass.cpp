// Several sequences in one pass of the CPU executor (continuous batching).
//
// The rows of all sequences are stacked: [seq 0: T0 rows][seq 1: T1 rows]... = N rows. Everything
// that is a per-row computation (embedding, norms, residuals, the MoE, the head, and the mixers'
// input and output projections) runs once over the N rows; the kernels are batch-invariant, so a
// row's result does not depend on its neighbours. What depends on the sequence (attention over its
// KV cache, the GDN conv and recurrence over its state) runs per sequence through the ordinary
// layer functions (attention.cpp, gdn.cpp), which see T_i rows at row 0 of the scratch as usual:
//
//   X = embed(all tokens)                                          [N][E]
//   per layer:  H = rms(X)
//               P_w = H W^T for each mixer input projection w      [N][w.rows]  (stacked)
//               per sequence i: h = H[i rows]; mixer(il, state_i)  linear(w, h) -> P_w[i rows]
//                                                                  linear(Wout, o) -> O[i rows]
//               X += O Wout^T                                      (stacked)
//               X += moe(rms(X))                                   (stacked)
//   logits = head(rms(X)) for the rows each sequence asked for
//
// The mixers call linear() for their projections; while a sequence's mixer runs, linear() asks
// stacked_linear() first, which serves a precomputed projection (input side) or records the input
// of the output projection to run it stacked afterwards. Anything it does not recognise falls
// through to the ordinary per-sequence matmul, which is slower but gives the same bits.
#include <algorithm>
#include <cstring>
#include <optional>
#include <fmt/format.h>

#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/pass_profile.h"
#include "backend/cpu/pass_scratch.h"
#include "kernels/convert.h"
#include "model/ops.h"

namespace clover::backend::cpu {

using model::ModelError;
namespace ops = model::ops;

namespace {

bool same_matrix(const kernels::MatRef& a, const kernels::MatRef& b) {
  return a.data == b.data && a.rows == b.rows && a.cols == b.cols && a.type == b.type;
}

// Shapes a scratch matrix without clearing it (its rows are written before they are read); grows
// only, so a warm pass allocates nothing even when layers alternate shapes.
void ensure(Mat& m, int64_t rows, int64_t cols) {
  if (static_cast<int64_t>(m.v.size()) < rows * cols) m.v.resize(static_cast<size_t>(rows * cols));
  m.cols = cols;
}

}  // namespace

bool CpuExecutor::stacked_linear(const kernels::MatRef& w, const float* x, int T, int64_t x_stride, float* y) {
  StackScratch& m = *stack_;
  if (x == s_->h.row(0) && x_stride == hp_.n_embd) {
    for (size_t i = 0; i < m.n_pre; ++i) {
      if (!same_matrix(m.pre[i].w, w)) continue;
      std::memcpy(y, m.pre[i].out.row(m.row0), sizeof(float) * static_cast<size_t>(T) * w.rows);
      return true;
    }
  }
  if (m.deferred.data && same_matrix(m.deferred, w)) {
    for (int t = 0; t < T; ++t) std::memcpy(m.deferred_in.row(m.row0 + t), x + t * x_stride, sizeof(float) * w.cols);
    m.deferred_seen = true;
    return true;
  }
  return false;
}

void CpuExecutor::run_stacked(std::span<Pass> passes) {
  int64_t N = 0;
  bool any_reverse = false;
  for (const Pass& p : passes) {
    if (p.kind == PassKind::Denoise && p.reverse_path) any_reverse = true;
    for (const Pass& q : passes)
      if (&q != &p && q.seq == p.seq) throw ModelError("a stacked pass got the same sequence twice");
    N += static_cast<int64_t>(p.tokens.size());
  }
  if (N > max_batch_)
    throw ModelError(fmt::format("a stacked pass of {} tokens exceeds the largest pass of {} tokens", N, max_batch_));

  // Every pass books the statistics of its own rows.
  segments_.clear();
  {
    int row0 = 0;
    for (Pass& p : passes) {
      p.stats = {};
      p.stats.tokens = static_cast<int64_t>(p.tokens.size());
      segments_.push_back(StatsSegment{row0, row0 + static_cast<int>(p.tokens.size()), &p.stats});
      row0 += static_cast<int>(p.tokens.size());
    }
  }

  if (!stack_) stack_ = std::make_unique<StackScratch>();
  StackScratch& m = *stack_;
  Scratch& s = *s_;
  const model::ModelWeights& w = model_.weights();
  const int E = hp_.n_embd;
  ensure(m.x, max_batch_, E);
  ensure(m.h, max_batch_, E);
  ensure(m.y, max_batch_, E);
  chunk_pos0_ = 0;  // routing traces of a stacked pass number rows in the stack

  // X = embed(tokens)
  {
    const PartScope part(PassPart::Embed, static_cast<uint64_t>(N) * w.token_embd.row_stride);
    int64_t r = 0;
    for (const Pass& p : passes)
      for (int32_t tok : p.tokens) {
        const auto* row = static_cast<const uint8_t*>(w.token_embd.data) + static_cast<size_t>(tok) * w.token_embd.row_stride;
        kernels::dequantize_row(w.token_embd.type, row, m.x.row(r++), E);
      }
  }

  for (int il = 0; il < n_layers_; ++il) {
    const model::LayerWeights& L = w.layers[il];
    {
      const PartScope part(PassPart::NormsResidual);
      for (int64_t r = 0; r < N; ++r) ops::rms_norm(m.x.row(r), L.attn_norm, m.h.row(r), E, hp_.rms_eps);
    }

    // The mixer's input projections over all rows, and which projection is its output.
    kernels::MatRef inputs[6];
    size_t n_inputs = 0;
    if (L.recurrent) {
      for (const kernels::MatRef& x : {L.gdn.qkv, L.gdn.gate, L.gdn.beta, L.gdn.alpha}) inputs[n_inputs++] = x;
      if (any_reverse) {
        inputs[n_inputs++] = L.gdn.rev_beta;
        inputs[n_inputs++] = L.gdn.rev_alpha;
      }
      m.deferred = L.gdn.out;
    } else {
      for (const kernels::MatRef& x : {L.attn.q, L.attn.k, L.attn.v}) inputs[n_inputs++] = x;
      m.deferred = L.attn.o;
    }
    if (m.pre.size() < n_inputs) m.pre.resize(n_inputs);
    m.n_pre = n_inputs;
    Projection proj[6];
    for (size_t i = 0; i < n_inputs; ++i) {
      m.pre[i].w = inputs[i];
      ensure(m.pre[i].out, max_batch_, inputs[i].rows);
      proj[i] = {&m.pre[i].w, m.pre[i].out.row(0)};
    }
    {
      const PartScope part(L.recurrent ? PassPart::GdnProjections : PassPart::AttnProjections);
      linears(std::span(proj, n_inputs), m.h.row(0), static_cast<int>(N), E);
    }
    ensure(m.deferred_in, max_batch_, m.deferred.cols);

    // Per sequence: attention or the GDN recurrence on its own state.
    int row0 = 0;
    bool all_deferred = true;
    m.deferred_rows.assign(passes.size(), false);
    for (size_t i = 0; i < passes.size(); ++i) {
      const Pass& p = passes[i];
      const int T = static_cast<int>(p.tokens.size());
      std::memcpy(s.h.row(0), m.h.row(row0), sizeof(float) * static_cast<size_t>(T) * E);
      m.row0 = row0;
      m.deferred_seen = false;
      reverse_path_ = p.reverse_path;
      stack_active_ = true;
      try {
        if (L.recurrent)
          gdn_layer(il, static_cast<CpuSequence&>(*p.seq), T, p.kind);
        else
          attention_layer(il, static_cast<CpuSequence&>(*p.seq), T, p.kind);
      } catch (...) {
        stack_active_ = false;
        throw;
      }
      stack_active_ = false;
      m.deferred_rows[i] = m.deferred_seen;
      if (!m.deferred_seen) {  // the layer ran its output projection itself
        all_deferred = false;
        std::memcpy(m.y.row(row0), s.y.row(0), sizeof(float) * static_cast<size_t>(T) * E);
      }
      row0 += T;
    }
    // The output projection over the stacked rows (or over each sequence's rows that deferred it).
    std::optional<PartScope> out_part(std::in_place, L.recurrent ? PassPart::GdnOutput : PassPart::AttnOutput);
    if (all_deferred) {
      linear(m.deferred, m.deferred_in.row(0), static_cast<int>(N), m.deferred_in.cols, m.y.row(0));
    } else {
      row0 = 0;
      for (size_t i = 0; i < passes.size(); ++i) {
        const int T = static_cast<int>(passes[i].tokens.size());
        if (m.deferred_rows[i]) linear(m.deferred, m.deferred_in.row(row0), T, m.deferred_in.cols, m.y.row(row0));
        row0 += T;
      }
    }
    out_part.reset();
    m.deferred = {};
    m.n_pre = 0;
    {
      const PartScope part(PassPart::NormsResidual);
      for (int64_t i = 0; i < N * E; ++i) m.x.v[i] += m.y.v[i];
      // The MoE over all rows, in the ordinary scratch (it holds max_batch rows).
      for (int64_t r = 0; r < N; ++r) ops::rms_norm(m.x.row(r), L.post_norm, s.h.row(r), E, hp_.rms_eps);
    }
    moe_layer(il, static_cast<int>(N));
    const PartScope part(PassPart::NormsResidual);
    for (int64_t i = 0; i < N * E; ++i) m.x.v[i] += s.y.v[i];
  }

  // Commit causal passes; then the head for the rows each sequence asked for.
  // Which rows of a pass get logits: Last, All, or a denoising pass's selection.
  auto wanted = [](const Pass& p, int64_t T, std::vector<int32_t>& out) {
    out.clear();
    if (p.kind == PassKind::Denoise && !p.denoise_rows.empty())
      out.assign(p.denoise_rows.begin(), p.denoise_rows.end());
    else if (p.kind == PassKind::Denoise || p.rows == LogitRows::All)
      for (int64_t t = 0; t < T; ++t) out.push_back(static_cast<int32_t>(t));
    else if (p.rows == LogitRows::Last)
      out.push_back(static_cast<int32_t>(T - 1));
  };
  if (hidden_out_) {  // the front of a layer split: commit, and hand the rows on to the device's layers
    for (const Pass& p : passes)
      if (p.kind == PassKind::Causal) static_cast<CpuSequence&>(*p.seq).advance(static_cast<int>(p.tokens.size()));
    std::memcpy(hidden_out_, m.x.row(0), sizeof(float) * static_cast<size_t>(N * E));
    return;
  }
  std::vector<int32_t> sel;
  int64_t n_rows = 0;
  {
    int64_t row0 = 0;
    for (const Pass& p : passes) {
      const int64_t T = static_cast<int64_t>(p.tokens.size());
      if (p.kind == PassKind::Causal) static_cast<CpuSequence&>(*p.seq).advance(static_cast<int>(T));
      wanted(p, T, sel);
      for (int32_t t : sel) ops::rms_norm(m.x.row(row0 + t), w.output_norm, m.h.row(n_rows++), E, hp_.rms_eps);
      row0 += T;
    }
  }
  if (n_rows == 0) return;
  const int64_t V = hp_.n_vocab;
  if (static_cast<int64_t>(m.logits.size()) < n_rows * V) m.logits.resize(static_cast<size_t>(n_rows * V));
  {
    const PartScope part(PassPart::Head);
    linear(w.output, m.h.row(0), static_cast<int>(n_rows), E, m.logits.data());
  }
  int64_t r = 0;
  for (const Pass& p : passes) {
    const int64_t T = static_cast<int64_t>(p.tokens.size());
    wanted(p, T, sel);
    // A Last pass has one row of logits; the others are laid out by block/prompt position.
    const bool last_only = p.kind == PassKind::Causal && p.rows == LogitRows::Last;
    for (size_t i = 0; i < sel.size(); ++i, ++r) {
      float* dst = p.logits + (last_only ? 0 : static_cast<int64_t>(sel[i]) * V);
      std::memcpy(dst, m.logits.data() + r * V, sizeof(float) * static_cast<size_t>(V));
    }
  }
}

}  // namespace clover::backend::cpu
