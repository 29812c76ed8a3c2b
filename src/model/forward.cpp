#include "model/forward.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "kernels/convert.h"
#include "model/forward_scratch.h"
#include "model/ops.h"

namespace clover::model {

Forward::Forward(const Model& model, ThreadPool& pool, int max_batch)
    : model_(model), hp_(model.hp()), pool_(pool), max_batch_(std::max(1, max_batch)), s_(std::make_unique<Scratch>()) {
  const int B = max_batch_;
  const HParams& hp = hp_;
  Scratch& s = *s_;
  s.x.resize(B, hp.n_embd);
  s.h.resize(B, hp.n_embd);
  s.y.resize(B, hp.n_embd);
  if (hp.n_attn_layers() > 0) {
    s.qg.resize(B, 2 * hp.n_head * hp.head_dim);
    s.k.resize(B, hp.n_head_kv * hp.head_dim);
    s.v.resize(B, hp.n_head_kv * hp.head_dim);
    s.q.resize(B, hp.n_head * hp.head_dim);
    s.attn.resize(B, hp.n_head * hp.head_dim);
    s.attn_scratch.resize(pool.size());
  }
  if (hp.n_gdn_layers() > 0) {
    s.qkv.resize(B, hp.gdn_qkv_dim());
    s.conv.resize(B, hp.gdn_qkv_dim());
    s.z.resize(B, hp.gdn_v_dim());
    s.beta.resize(B, hp.gdn_v_heads);
    s.alpha.resize(B, hp.gdn_v_heads);
    s.o.resize(B, hp.gdn_v_dim());
    s.rev_beta.resize(B, hp.gdn_v_heads);
    s.rev_alpha.resize(B, hp.gdn_v_heads);
  }
  const int k = hp.n_expert_used;
  s.router.resize(B, hp.n_expert);
  s.chosen.resize(static_cast<size_t>(B) * k);
  s.chosen_w.resize(static_cast<size_t>(B) * k);
  s.expert_count.resize(hp.n_expert);
  s.expert_first.resize(hp.n_expert);
  s.routed_token.resize(static_cast<size_t>(B) * k);
  s.row_of.resize(static_cast<size_t>(B) * k);
  const int64_t rows = static_cast<int64_t>(B) * (k + 1);
  s.iota.resize(rows);
  for (int64_t i = 0; i < rows; ++i) s.iota[i] = static_cast<int32_t>(i);
  const int64_t ff = std::max(hp.n_ff_exp, hp.n_ff_shexp);
  s.ffn_gate.resize(rows, ff);
  s.ffn_up.resize(rows, ff);
  s.ffn_down.resize(rows, hp.n_embd);
  s.shared_gamma.resize(B);
}

Forward::~Forward() = default;

void Forward::linear(const kernels::MatRef& w, const float* x, int T, int64_t x_stride, float* y) {
  if (multi_active_ && multi_linear(w, x, T, x_stride, y)) return;
  s_->acts.convert(x, T, w.cols, x_stride, kernels::activation_type(w.type));
  const kernels::ActRows& a = s_->acts;
  const kernels::SumOrder order = kernels::sum_order(w.type, w.rows, w.cols);
  // Below ~64K multiply-adds a parallel region costs more than it saves.
  if (w.rows * w.cols * T < (int64_t{1} << 16)) {
    kernels::matmul(w, a, y, w.rows, 0, w.rows, order);
    return;
  }
  pool_.parallel_for(w.rows, 16, [&](int64_t b, int64_t e) { kernels::matmul(w, a, y, w.rows, b, e, order); });
}

void Forward::check_tokens(const SequenceState& st, std::span<const int32_t> tokens) const {
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0) throw ModelError("no tokens to evaluate");
  if (st.n_past + T > st.n_ctx)
    throw ModelError(fmt::format("context full: {} cached + {} new tokens exceed the context of {}", st.n_past, T, st.n_ctx));
  for (int32_t t : tokens)
    if (t < 0 || t >= hp_.n_vocab) throw ModelError(fmt::format("token id {} is outside the vocabulary (0..{})", t, hp_.n_vocab - 1));
}

void Forward::check_rows(size_t block_size, std::span<const int32_t> rows) const {
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || static_cast<size_t>(rows[i]) >= block_size || (i > 0 && rows[i] <= rows[i - 1]))
      throw ModelError(fmt::format("denoise rows must be ascending block positions below {} (got {} at index {})", block_size,
                                   rows[i], i));
}

void Forward::denoise(SequenceState& st, std::span<const int32_t> block, float* logits, bool reverse_path,
                      std::span<const int32_t> rows) {
  check_tokens(st, block);
  check_rows(block.size(), rows);
  if (static_cast<int64_t>(block.size()) > max_batch_)
    throw ModelError(fmt::format("a block of {} positions exceeds the largest pass of {} tokens", block.size(), max_batch_));
  if (reverse_path && !hp_.has_reverse_path)
    throw ModelError("this file has no reverse in-block GDN path (ssm_rev_* tensors): it runs AR only, or denoise without the reverse path");
  stats_ = {};
  reverse_path_ = reverse_path;
  run_chunk(st, block, LogitRows::All, logits, PassKind::Denoise, rows);
}

void Forward::causal(SequenceState& st, std::span<const int32_t> tokens, LogitRows rows, float* logits) {
  check_tokens(st, tokens);
  const int64_t T = static_cast<int64_t>(tokens.size());
  stats_ = {};
  for (int64_t b = 0; b < T; b += max_batch_) {
    const int64_t n = std::min<int64_t>(max_batch_, T - b);
    const bool last_chunk = b + n == T;
    LogitRows chunk_rows = rows == LogitRows::All ? LogitRows::All : (last_chunk ? rows : LogitRows::None);
    float* out = rows == LogitRows::All ? logits + b * hp_.n_vocab : logits;
    run_chunk(st, tokens.subspan(b, n), chunk_rows, out, PassKind::Causal);
  }
}

void Forward::run_chunk(SequenceState& st, std::span<const int32_t> tokens, LogitRows rows, float* logits, PassKind kind,
                        std::span<const int32_t> selected) {
  const int T = static_cast<int>(tokens.size());
  Scratch& s = *s_;
  const ModelWeights& w = model_.weights();
  stats_.tokens += T;
  chunk_pos0_ = st.n_past;

  // x = embed(tokens)
  for (int t = 0; t < T; ++t) {
    const auto* row = static_cast<const uint8_t*>(w.token_embd.data) + static_cast<size_t>(tokens[t]) * w.token_embd.row_stride;
    kernels::dequantize_row(w.token_embd.type, row, s.x.row(t), hp_.n_embd);
  }

  for (int il = 0; il < hp_.n_layer; ++il) {
    const LayerWeights& L = w.layers[il];
    for (int t = 0; t < T; ++t) ops::rms_norm(s.x.row(t), L.attn_norm, s.h.row(t), hp_.n_embd, hp_.rms_eps);
    if (L.recurrent)
      gdn_layer(il, st, T, kind);
    else
      attention_layer(il, st, T, kind);
    for (int64_t i = 0; i < static_cast<int64_t>(T) * hp_.n_embd; ++i) s.x.v[i] += s.y.v[i];

    for (int t = 0; t < T; ++t) ops::rms_norm(s.x.row(t), L.post_norm, s.h.row(t), hp_.n_embd, hp_.rms_eps);
    moe_layer(il, T);
    for (int64_t i = 0; i < static_cast<int64_t>(T) * hp_.n_embd; ++i) s.x.v[i] += s.y.v[i];
  }
  if (kind == PassKind::Causal) st.n_past += T;
  head(T, rows, logits, selected);
}

void Forward::head(int T, LogitRows rows, float* logits, std::span<const int32_t> selected) {
  if (rows == LogitRows::None) return;
  Scratch& s = *s_;
  const ModelWeights& w = model_.weights();
  if (!selected.empty()) {
    // The selected rows, normed into consecutive scratch rows; their logits computed in place at
    // the front of `logits`, then moved to their own rows (last first: selected[i] >= i).
    const int n = static_cast<int>(selected.size());
    for (int i = 0; i < n; ++i) ops::rms_norm(s.x.row(selected[i]), w.output_norm, s.h.row(i), hp_.n_embd, hp_.rms_eps);
    linear(w.output, s.h.row(0), n, hp_.n_embd, logits);
    const size_t V = static_cast<size_t>(hp_.n_vocab);
    for (int i = n - 1; i >= 0; --i)
      if (selected[i] != i) std::memcpy(logits + static_cast<size_t>(selected[i]) * V, logits + i * V, sizeof(float) * V);
    return;
  }
  const int first = rows == LogitRows::Last ? T - 1 : 0;
  const int n = T - first;
  for (int t = first; t < T; ++t) ops::rms_norm(s.x.row(t), w.output_norm, s.h.row(t), hp_.n_embd, hp_.rms_eps);
  linear(w.output, s.h.row(first), n, hp_.n_embd, logits);
}

}  // namespace clover::model
