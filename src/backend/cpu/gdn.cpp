// Gated DeltaNet layer (qwen35moe "linear attention" layers; reference/qwen35moe-gguf.md 5.2).
//
//   m = Wqkv h,  z = Wz h,  beta = sigmoid(Wb h),  g = softplus(Wa h + dt_bias) * a      (a < 0)
//   c = silu(causal depthwise conv_K(m))  ->  q [H_k][d], k [H_k][d], v [H_v][d];  q, k L2-normalised
//   per value head h (key head h mod H_k), state S (d x d):
//       S = exp(g) S;   S += k (x) ((v - S^T k) * beta);   o = S^T q / sqrt(d)
//   y = Wout (rms(o, ssm_norm) * silu(z))
//
// A denoising pass scans from a copy of the committed state (the state is left as it was) and,
// with the reverse path, adds o_rev (CLOVER-SPEC 3.3): a second delta rule run backwards over the
// block with its own beta' and decay g', so each position also sees the later block positions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/gdn.h"
#include "kernels/vecmath.h"
#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/pass_scratch.h"
#include "model/ops.h"

namespace clover::backend::cpu {

namespace ops = model::ops;

void CpuExecutor::gdn_layer(int il, CpuSequence& seq, int T, PassKind kind) {
  Scratch& s = *s_;
  const model::GdnWeights& W = model_.weights().layers[il].gdn;
  GdnLayerState& committed = seq.gdn(seq.layer_slot(il));
  const bool denoise = kind == PassKind::Denoise;
  if (denoise) {
    s.gdn_copy.conv_window = committed.conv_window;  // same sizes every time: no allocation once warm
    s.gdn_copy.ssm = committed.ssm;
  }
  GdnLayerState& gs = denoise ? s.gdn_copy : committed;
  const int E = hp_.n_embd, C = hp_.gdn_qkv_dim(), K = hp_.conv_kernel;
  const int Hk = hp_.gdn_k_heads, Hv = hp_.gdn_v_heads, d = hp_.gdn_head_dim;

  linear(W.qkv, s.h.row(0), T, E, s.qkv.row(0));    // [T][C]
  linear(W.gate, s.h.row(0), T, E, s.z.row(0));     // [T][Hv*d]
  linear(W.beta, s.h.row(0), T, E, s.beta.row(0));  // [T][Hv]
  linear(W.alpha, s.h.row(0), T, E, s.alpha.row(0));

  // Causal depthwise conv over time, then silu (kernels/vecmath.h). Inputs before this batch come
  // from the state (the last K-1 pre-conv inputs, oldest first).
  pool_.parallel_for(C, 64, [&](int64_t cb, int64_t ce) {
    const float* taps[model::kMaxConvKernel];
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < K; ++j) {
        const int src = t - (K - 1) + j;  // time index of tap j
        taps[j] = src >= 0 ? s.qkv.row(src) : gs.conv_window.data() + static_cast<size_t>(K - 1 + src) * C;
      }
      kernels::conv_silu(taps, K, W.conv1d, C, cb, ce, s.conv_out.row(t));
    }
    // New conv state: the last K-1 inputs of (old state ++ batch).
    for (int j = 0; j < K - 1; ++j) {
      const int src = T - (K - 1) + j;
      for (int64_t ch = cb; ch < ce; ++ch)
        gs.conv_window[static_cast<size_t>(j) * C + ch] = src >= 0 ? s.qkv.row(src)[ch] : gs.conv_window[static_cast<size_t>(K - 1 + src) * C + ch];
    }
  });

  // L2-normalise q and k heads.
  pool_.parallel_for(T, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      for (int h = 0; h < 2 * Hk; ++h) ops::l2_norm(s.conv_out.row(t) + h * d, d, hp_.rms_eps);
  });

  // The delta rule (kernels/gdn.h), one value head per work item.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  pool_.parallel_for(Hv, 1, [&](int64_t hb, int64_t he) {
    for (int64_t h = hb; h < he; ++h) {
      float* S = gs.ssm.data() + h * d * d;  // S[j][i] = S_h[i][j]
      const int kh = static_cast<int>(h % Hk);
      for (int t = 0; t < T; ++t) {
        const float* q = s.conv_out.row(t) + kh * d;
        const float* k = s.conv_out.row(t) + (Hk + kh) * d;
        const float* v = s.conv_out.row(t) + 2 * Hk * d + h * d;
        const float g = ops::softplus(s.alpha.row(t)[h] + W.dt_bias[h]) * W.a[h];
        const float decay = std::exp(g);
        const float beta = ops::sigmoid(s.beta.row(t)[h]);
        kernels::gdn_step(S, q, k, v, decay, beta, scale, d, s.o.row(t) + h * d);
      }
    }
  });

  if (denoise && reverse_path_) gdn_reverse_path(W, T);

  // Gated RMSNorm of every head's output.
  pool_.parallel_for(static_cast<int64_t>(T) * Hv, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t t = item / Hv, h = item % Hv;
      float* o = s.o.row(t) + h * d;
      ops::rms_norm(o, W.norm, o, d, hp_.rms_eps);
      float* z = s.z.row(t) + h * d;
      kernels::silu_row(z, z, d);  // a head's gate is one row of silu (ggml's view of z)
      for (int j = 0; j < d; ++j) o[j] *= z[j];
    }
  });

  linear(W.out, s.o.row(0), T, Hv * d, s.y.row(0));
}

// The reverse in-block path, added to s.o (CLOVER-SPEC 3.3). h_t is the layer's normed input
// (s.h), q/k/v the conv outputs of the forward path (s.conv_out, already L2-normalised).
//   beta'_t = sigmoid(Wrev_beta h_t),  g'_t = softplus(Wrev_alpha h_t + rev_dt_bias) * rev_a
//   R = 0;  for t = B-1 .. 0:  o[t] += R^T q_t / sqrt(d);  R = exp(g'_t) R;  R += k_t (x) ((v_t - R^T k_t) beta'_t)
void CpuExecutor::gdn_reverse_path(const model::GdnWeights& W, int T) {
  Scratch& s = *s_;
  const int E = hp_.n_embd, Hk = hp_.gdn_k_heads, Hv = hp_.gdn_v_heads, d = hp_.gdn_head_dim;
  linear(W.rev_beta, s.h.row(0), T, E, s.rev_beta.row(0));  // [T][Hv]
  linear(W.rev_alpha, s.h.row(0), T, E, s.rev_alpha.row(0));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  pool_.parallel_for(Hv, 1, [&](int64_t hb, int64_t he) {
    // Scratch state per thread: which thread runs a head varies, so it cannot be indexed by thread.
    thread_local std::vector<float> R;
    R.resize(static_cast<size_t>(d) * d);  // [d_v][d_k], rows contiguous as in the forward state
    for (int64_t h = hb; h < he; ++h) {
      std::fill(R.begin(), R.end(), 0.f);
      const int kh = static_cast<int>(h % Hk);
      for (int t = T - 1; t >= 0; --t) {
        const float* q = s.conv_out.row(t) + kh * d;
        const float* k = s.conv_out.row(t) + (Hk + kh) * d;
        const float* v = s.conv_out.row(t) + 2 * Hk * d + h * d;
        const float g = ops::softplus(s.rev_alpha.row(t)[h] + W.rev_dt_bias[h]) * W.rev_a[h];
        const float decay = std::exp(g);
        const float beta = ops::sigmoid(s.rev_beta.row(t)[h]);
        kernels::gdn_step_reverse(R.data(), q, k, v, decay, beta, scale, d, s.o.row(t) + h * d);
      }
    }
  });
}

}  // namespace clover::backend::cpu
