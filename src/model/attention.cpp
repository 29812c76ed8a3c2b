// Gated full attention (qwen35moe "full attention" layers; reference/qwen35moe-gguf.md 5.1).
//
//   qg = Wq h            per head [query(hd) | gate(hd)]
//   q  = rope(rms(query, q_norm)),  k = rope(rms(Wk h, k_norm)),  v = Wv h      (GQA: n_head_kv heads)
//   o  = softmax(q k^T / sqrt(hd)) v  *  sigmoid(gate)          over the cached prefix and, causally,
//                                                               the batch (a denoising pass: the whole block)
//   y  = Wo o
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/forward.h"
#include "model/forward_scratch.h"
#include "model/ops.h"

namespace clover::model {

void Forward::attention_layer(int il, SequenceState& st, int T, PassKind kind) {
  Scratch& s = *s_;
  const AttentionWeights& W = model_.weights().layers[il].attn;
  const int hd = hp_.head_dim, nh = hp_.n_head, nkv = hp_.n_head_kv;
  const int kv_row = nkv * hd;
  const int slot = st.slot[il];
  float* Kc = st.k[slot].data();
  float* Vc = st.v[slot].data();
  const int n_past = st.n_past;

  linear(W.q, s.h.row(0), T, hp_.n_embd, s.qg.row(0));  // [T][nh * 2hd]
  linear(W.k, s.h.row(0), T, hp_.n_embd, s.k.row(0));   // [T][nkv * hd]
  linear(W.v, s.h.row(0), T, hp_.n_embd, s.v.row(0));

  // Per-head norms and rope; K and V go to the cache at their positions.
  pool_.parallel_for(T, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t pos = n_past + t;
      for (int h = 0; h < nh; ++h) {
        float* q = s.q.row(t) + h * hd;
        ops::rms_norm(s.qg.row(t) + h * 2 * hd, W.q_norm, q, hd, hp_.rms_eps);
        ops::rope_neox(q, hp_.n_rot, pos, hp_.rope_theta);
      }
      float* krow = Kc + pos * kv_row;
      for (int h = 0; h < nkv; ++h) {
        ops::rms_norm(s.k.row(t) + h * hd, W.k_norm, krow + h * hd, hd, hp_.rms_eps);
        ops::rope_neox(krow + h * hd, hp_.n_rot, pos, hp_.rope_theta);
      }
      std::memcpy(Vc + pos * kv_row, s.v.row(t), sizeof(float) * kv_row);
    }
  });

  // Causal softmax attention, one (token, head) pair at a time.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int group = nh / nkv;
  const int64_t n_ctx = st.n_ctx;
  pool_.run_on_all([&](int thread) {
    Mat& sc = s.scores[thread];
    if (sc.cols < n_ctx) sc.resize(1, n_ctx);
    int64_t b, e;
    split_range(static_cast<int64_t>(T) * nh, 1, pool_.size(), thread, b, e);
    for (int64_t item = b; item < e; ++item) {
      const int64_t t = item / nh;
      const int h = static_cast<int>(item % nh), kvh = h / group;
      const int64_t n_keys = kind == PassKind::Denoise ? n_past + T : n_past + t + 1;
      const float* q = s.q.row(t) + h * hd;
      float* p = sc.row(0);
      float mx = -INFINITY;
      for (int64_t j = 0; j < n_keys; ++j) {
        p[j] = ops::dot(q, Kc + j * kv_row + kvh * hd, hd) * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n_keys; ++j) {
        p[j] = std::exp(p[j] - mx);
        sum += p[j];
      }
      const float inv = static_cast<float>(1.0 / sum);
      float* o = s.attn.row(t) + h * hd;
      std::fill(o, o + hd, 0.f);
      for (int64_t j = 0; j < n_keys; ++j) {
        const float pj = p[j] * inv;
        const float* vr = Vc + j * kv_row + kvh * hd;
        for (int d = 0; d < hd; ++d) o[d] += pj * vr[d];
      }
      const float* gate = s.qg.row(t) + h * 2 * hd + hd;
      for (int d = 0; d < hd; ++d) o[d] *= ops::sigmoid(gate[d]);
    }
  });

  linear(W.o, s.attn.row(0), T, nh * hd, s.y.row(0));
}

}  // namespace clover::model
