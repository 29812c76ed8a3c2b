#include "backend/cpu/cpu_executor.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fmt/format.h>
#include <thread>

#include "backend/cpu/pass_profile.h"
#include "backend/cpu/pass_scratch.h"
#include "gguf/gguf.h"
#include "kernels/convert.h"
#include "kernels/vecmath.h"
#include "model/ops.h"

namespace clover::backend::cpu {

using model::ModelError;
namespace ops = model::ops;

namespace {
int64_t tokens_of(std::span<const Pass> passes) {
  int64_t n = 0;
  for (const Pass& p : passes) n += static_cast<int64_t>(p.tokens.size());
  return n;
}
}  // namespace

CpuExecutor::Scratch::Scratch(const model::HParams& hp, ThreadPool& pool, int B)
    : experts(pool, static_cast<int64_t>(B) * (hp.n_expert_used + 1), hp.n_embd, std::max(hp.n_ff_exp, hp.n_ff_shexp)) {
  x.resize(B, hp.n_embd);
  h.resize(B, hp.n_embd);
  y.resize(B, hp.n_embd);
  if (hp.n_attn_layers() > 0) {
    qg.resize(B, 2 * hp.n_head * hp.head_dim);
    k.resize(B, hp.n_head_kv * hp.head_dim);
    v.resize(B, hp.n_head_kv * hp.head_dim);
    q.resize(B, hp.n_head * hp.head_dim);
    attn.resize(B, hp.n_head * hp.head_dim);
    attn_scratch.resize(pool.size());
  }
  if (hp.n_gdn_layers() > 0) {
    qkv.resize(B, hp.gdn_qkv_dim());
    conv_out.resize(B, hp.gdn_qkv_dim());
    z.resize(B, hp.gdn_v_dim());
    beta.resize(B, hp.gdn_v_heads);
    alpha.resize(B, hp.gdn_v_heads);
    o.resize(B, hp.gdn_v_dim());
    rev_beta.resize(B, hp.gdn_v_heads);
    rev_alpha.resize(B, hp.gdn_v_heads);
  }
  const int k = hp.n_expert_used;
  router.resize(B, hp.n_expert);
  chosen.resize(static_cast<size_t>(B) * k);
  chosen_w.resize(static_cast<size_t>(B) * k);
  shared_gamma.resize(B);
}

CpuExecutor::CpuExecutor(const model::Model& model, const Options& opts)
    : model_(model),
      hp_(model.hp()),
      pool_(opts.n_threads > 0 ? opts.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      max_batch_(std::max(1, opts.max_batch)),
      n_layers_(opts.n_layers < 0 ? model.hp().n_layer : std::min(opts.n_layers, model.hp().n_layer)),
      s_(std::make_unique<Scratch>(hp_, pool_, max_batch_)),
      conv_taps_(static_cast<size_t>(n_layers_)) {
  for (int il = 0; il < n_layers_; ++il) {
    if (!hp_.recurrent[il]) continue;
    const int K = hp_.conv_kernel;
    const int64_t C = hp_.gdn_qkv_dim();
    conv_taps_[il].resize(static_cast<size_t>(K) * C);
    kernels::conv_taps_major(model.weights().layers[il].gdn.conv1d, K, C, conv_taps_[il].data());
  }
}

CpuExecutor::~CpuExecutor() = default;

std::unique_ptr<Sequence> CpuExecutor::new_sequence(int n_ctx, KvTypes types) {
  return std::make_unique<CpuSequence>(hp_, n_ctx, types, n_layers_);
}

void CpuExecutor::linear(const kernels::MatRef& w, const float* x, int T, int64_t x_stride, float* y) {
  if (stack_active_ && stacked_linear(w, x, T, x_stride, y)) return;
  if (PassProfile* prof = PassProfile::active()) prof->add_bytes(mat_bytes(w));
  s_->acts.convert(x, T, w.cols, x_stride, kernels::activation_type(w.type));
  const kernels::ActRows& a = s_->acts;
  const kernels::SumOrder order = kernels::sum_order(w.type, w.rows, w.cols);
  // Below ~64K multiply-adds a parallel region costs more than it saves.
  if (w.rows * w.cols * T < (int64_t{1} << 16)) {
    kernels::matmul(w, a, y, w.rows, 0, w.rows, order);
    return;
  }
  pool_.parallel_for_owned(w.rows, 16, [&](int64_t b, int64_t e) { kernels::matmul(w, a, y, w.rows, b, e, order); });
}

void CpuExecutor::linears(std::span<const Projection> ps, const float* x, int T, int64_t x_stride) {
  constexpr size_t kMax = 8;
  bool together = !stack_active_ && ps.size() > 1 && ps.size() <= kMax;
  const kernels::MatRef& w0 = *ps[0].w;
  const DType act = kernels::activation_type(w0.type);
  for (const Projection& p : ps)
    together = together && p.w->cols == w0.cols && kernels::activation_type(p.w->type) == act;
  if (!together) {
    for (const Projection& p : ps) linear(*p.w, x, T, x_stride, p.y);
    return;
  }
  s_->acts.convert(x, T, w0.cols, x_stride, act);
  if (PassProfile* prof = PassProfile::active())
    for (const Projection& p : ps) prof->add_bytes(mat_bytes(*p.w));
  const kernels::ActRows& a = s_->acts;
  // One row space: projection i's rows start at first[i], a multiple of 16, so that no chunk of
  // the region (a multiple of 16 rows) splits a 16-row tile of a matrix.
  std::array<int64_t, kMax + 1> first{};
  std::array<kernels::SumOrder, kMax> order{};
  int64_t macs = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const kernels::MatRef& w = *ps[i].w;
    order[i] = kernels::sum_order(w.type, w.rows, w.cols);
    first[i + 1] = first[i] + (w.rows + 15) / 16 * 16;
    macs += w.rows * w.cols * T;
  }
  const auto rows = [&](int64_t b, int64_t e) {
    for (size_t i = 0; i < ps.size(); ++i) {
      const kernels::MatRef& w = *ps[i].w;
      const int64_t lo = std::max(b, first[i]), hi = std::min(e, first[i] + w.rows);
      // A range that reaches a matrix's end goes on with the next matrix's first rows.
      const void* then = hi == first[i] + w.rows && i + 1 < ps.size() ? kernels::row_address(*ps[i + 1].w, 0) : nullptr;
      if (lo < hi) kernels::matmul(w, a, ps[i].y, w.rows, lo - first[i], hi - first[i], order[i], then);
    }
  };
  // As in linear(): below ~64K multiply-adds a parallel region costs more than it saves.
  if (macs < (int64_t{1} << 16)) {
    rows(0, first[ps.size()]);
    return;
  }
  pool_.parallel_for_owned(first[ps.size()], 16, rows);
}

void CpuExecutor::check(const Pass& p) const {
  if (!p.seq) throw ModelError("a pass without a sequence");
  if (!dynamic_cast<const CpuSequence*>(p.seq)) throw ModelError("the sequence belongs to another backend");
  check_pass_tokens(p, hp_.n_vocab);
  check_pass_outputs(p);
  check_denoise_pass(p, max_batch_, hp_.has_reverse_path);
}

void CpuExecutor::run(std::span<Pass> passes) {
  if (passes.empty()) throw ModelError("a pass list needs at least one pass");
  if (n_layers_ < hp_.n_layer)
    throw ModelError(fmt::format("this CPU executor runs layers 0-{} of {} only (the front of a layer split: run_front)",
                                 n_layers_ - 1, hp_.n_layer));
  for (const Pass& p : passes) check(p);
  // Selection (row_top.h): rows the caller does not want to see are computed into scratch, then
  // reduced by the reference selection, whose sums are the sampler's.
  const int64_t V = hp_.n_vocab;
  if (select_rows_.size() < passes.size()) select_rows_.resize(passes.size());
  std::vector<bool> borrowed(passes.size(), false);
  for (size_t i = 0; i < passes.size(); ++i) {
    Pass& p = passes[i];
    if (p.top_k == 0 || p.logits) continue;
    select_rows_[i].resize(static_cast<size_t>(output_rows(p) * V));
    p.logits = select_rows_[i].data();
    borrowed[i] = true;
  }
  try {
    const PassScope timed(tokens_of(passes));
    run_checked(passes);
  } catch (...) {
    for (size_t i = 0; i < passes.size(); ++i)
      if (borrowed[i]) passes[i].logits = nullptr;
    throw;
  }
  for (size_t i = 0; i < passes.size(); ++i) {
    Pass& p = passes[i];
    if (p.top_k == 0) continue;
    for (const WantedRow& r : wanted_rows(p)) sampling::select_top_ref(p.logits + r.out * V, V, p.top_k, p.top[r.out]);
    if (borrowed[i]) p.logits = nullptr;
  }
}

void CpuExecutor::run_front(std::span<Pass> passes, float* hidden) {
  if (passes.empty()) throw ModelError("a pass list needs at least one pass");
  for (const Pass& p : passes) {
    if (!p.seq) throw ModelError("a pass without a sequence");
    if (!dynamic_cast<const CpuSequence*>(p.seq)) throw ModelError("the sequence belongs to another backend");
    check_pass_tokens(p, hp_.n_vocab);
    check_denoise_pass(p, max_batch_, hp_.has_reverse_path);
  }
  hidden_out_ = hidden;
  hidden_row0_ = 0;
  try {
    const PassScope timed(tokens_of(passes));
    run_checked(passes);
  } catch (...) {
    hidden_out_ = nullptr;
    throw;
  }
  hidden_out_ = nullptr;
}

void CpuExecutor::run_checked(std::span<Pass> passes) {
  if (passes.size() > 1) {
    run_stacked(passes);
    return;
  }
  Pass& p = passes.front();
  p.stats = {};
  segments_.assign(1, StatsSegment{0, 0, &p.stats});
  if (p.kind == PassKind::Denoise)
    run_denoise(p);
  else
    run_causal(p);
}

void CpuExecutor::run_denoise(Pass& p) {
  reverse_path_ = p.reverse_path;
  segments_[0].row_end = static_cast<int>(p.tokens.size());
  run_chunk(static_cast<CpuSequence&>(*p.seq), p.tokens, LogitRows::All, p.logits, PassKind::Denoise, p.denoise_rows);
}

void CpuExecutor::run_causal(Pass& p) {
  auto& seq = static_cast<CpuSequence&>(*p.seq);
  const int64_t T = static_cast<int64_t>(p.tokens.size());
  for (int64_t b = 0; b < T; b += max_batch_) {
    const int64_t n = std::min<int64_t>(max_batch_, T - b);
    const bool last_chunk = b + n == T;
    const LogitRows chunk_rows = p.rows == LogitRows::All ? LogitRows::All : (last_chunk ? p.rows : LogitRows::None);
    float* out = p.rows == LogitRows::All ? p.logits + b * hp_.n_vocab : p.logits;
    segments_[0].row_end = static_cast<int>(n);
    hidden_row0_ = b;
    run_chunk(seq, p.tokens.subspan(b, n), chunk_rows, out, PassKind::Causal);
  }
}

void CpuExecutor::run_chunk(CpuSequence& seq, std::span<const int32_t> tokens, LogitRows rows, float* logits, PassKind kind,
                            std::span<const int32_t> selected) {
  const int T = static_cast<int>(tokens.size());
  Scratch& s = *s_;
  const model::ModelWeights& w = model_.weights();
  segments_[0].stats->tokens += T;
  chunk_pos0_ = seq.n_past();

  {  // x = embed(tokens)
    const PartScope part(PassPart::Embed, static_cast<uint64_t>(T) * w.token_embd.row_stride);
    for (int t = 0; t < T; ++t) {
      const auto* row = static_cast<const uint8_t*>(w.token_embd.data) + static_cast<size_t>(tokens[t]) * w.token_embd.row_stride;
      kernels::dequantize_row(w.token_embd.type, row, s.x.row(t), hp_.n_embd);
    }
  }

  const int64_t TE = static_cast<int64_t>(T) * hp_.n_embd;
  for (int il = 0; il < n_layers_; ++il) {
    const model::LayerWeights& L = w.layers[il];
    {
      const PartScope part(PassPart::NormsResidual);
      for (int t = 0; t < T; ++t) ops::rms_norm(s.x.row(t), L.attn_norm, s.h.row(t), hp_.n_embd, hp_.rms_eps);
    }
    if (L.recurrent)
      gdn_layer(il, seq, T, kind);
    else
      attention_layer(il, seq, T, kind);
    {
      const PartScope part(PassPart::NormsResidual);
      for (int64_t i = 0; i < TE; ++i) s.x.v[i] += s.y.v[i];
      for (int t = 0; t < T; ++t) ops::rms_norm(s.x.row(t), L.post_norm, s.h.row(t), hp_.n_embd, hp_.rms_eps);
    }
    moe_layer(il, T);
    const PartScope part(PassPart::NormsResidual);
    for (int64_t i = 0; i < TE; ++i) s.x.v[i] += s.y.v[i];
  }
  if (kind == PassKind::Causal) seq.advance(T);
  if (hidden_out_) {  // the front of a layer split: the rows go on to the device's layers
    std::memcpy(hidden_out_ + hidden_row0_ * hp_.n_embd, s.x.row(0), sizeof(float) * static_cast<size_t>(T) * hp_.n_embd);
    return;
  }
  head(T, rows, logits, selected);
}

void CpuExecutor::head(int T, LogitRows rows, float* logits, std::span<const int32_t> selected) {
  if (rows == LogitRows::None) return;
  Scratch& s = *s_;
  const model::ModelWeights& w = model_.weights();
  if (!selected.empty()) {
    // The selected rows, normed into consecutive scratch rows; their logits computed in place at
    // the front of `logits`, then moved to their own rows (last first: selected[i] >= i).
    const int n = static_cast<int>(selected.size());
    {
      const PartScope part(PassPart::NormsResidual);
      for (int i = 0; i < n; ++i) ops::rms_norm(s.x.row(selected[i]), w.output_norm, s.h.row(i), hp_.n_embd, hp_.rms_eps);
    }
    const PartScope part(PassPart::Head);
    linear(w.output, s.h.row(0), n, hp_.n_embd, logits);
    const size_t V = static_cast<size_t>(hp_.n_vocab);
    for (int i = n - 1; i >= 0; --i)
      if (selected[i] != i) std::memcpy(logits + static_cast<size_t>(selected[i]) * V, logits + i * V, sizeof(float) * V);
    return;
  }
  const int first = rows == LogitRows::Last ? T - 1 : 0;
  const int n = T - first;
  {
    const PartScope part(PassPart::NormsResidual);
    for (int t = first; t < T; ++t) ops::rms_norm(s.x.row(t), w.output_norm, s.h.row(t), hp_.n_embd, hp_.rms_eps);
  }
  const PartScope part(PassPart::Head);
  linear(w.output, s.h.row(first), n, hp_.n_embd, logits);
}

}  // namespace clover::backend::cpu
