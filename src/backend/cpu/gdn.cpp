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
#include "backend/cpu/pass_profile.h"
#include "backend/cpu/pass_scratch.h"
#include "model/ops.h"

namespace clover::backend::cpu {

namespace ops = model::ops;

namespace {

// What value head h's delta-rule step at position t reads: q and k of its key head (h mod Hk) and
// its v from the conv output, the decay exp(softplus(alpha + dt_bias) * a) and sigmoid(beta).
struct StepInputs {
  const float *q, *k, *v;
  float decay, beta;
};
StepInputs step_inputs(const Mat& conv_out, int Hk, int d, int64_t h, int t, float alpha_biased, float a, float beta_logit) {
  const float* row = conv_out.row(t);
  const int64_t kh = h % Hk;
  return {row + kh * d, row + (Hk + kh) * d, row + 2 * Hk * d + h * d,
          std::exp(ops::softplus(alpha_biased) * a), ops::sigmoid(beta_logit)};
}

}  // namespace

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

  const bool reverse = denoise && reverse_path_;
  const Projection in[] = {{&W.qkv, s.qkv.row(0)},    // [T][C]
                           {&W.gate, s.z.row(0)},     // [T][Hv*d]
                           {&W.beta, s.beta.row(0)},  // [T][Hv]
                           {&W.alpha, s.alpha.row(0)},
                           {&W.rev_beta, s.rev_beta.row(0)},  // the reverse path's, [T][Hv]
                           {&W.rev_alpha, s.rev_alpha.row(0)}};
  {
    const PartScope part(PassPart::GdnProjections);  // (a stacked pass ran them already: ~0 here)
    linears(std::span(in, reverse ? 6 : 4), s.h.row(0), T, E);
  }

  // Causal depthwise conv over time, then silu (kernels/vecmath.h), of channels [cb, ce). Inputs
  // before this batch come from the state (the last K-1 pre-conv inputs, oldest first), which
  // then keeps the last K-1 inputs of (old state ++ batch).
  const auto conv = [&](int64_t cb, int64_t ce) {
    const float* taps[model::kMaxConvKernel];
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < K; ++j) {
        const int src = t - (K - 1) + j;  // time index of tap j
        taps[j] = src >= 0 ? s.qkv.row(src) : gs.conv_window.data() + static_cast<size_t>(K - 1 + src) * C;
      }
      kernels::conv_silu(taps, K, conv_taps_[il].data(), C, cb, ce, s.conv_out.row(t));
    }
    for (int j = 0; j < K - 1; ++j) {  // window row j <- input T-(K-1)+j: a later window row, or the batch's
      const int src = T - (K - 1) + j;
      const float* from = src >= 0 ? s.qkv.row(src) : gs.conv_window.data() + static_cast<size_t>(K - 1 + src) * C;
      std::copy(from + cb, from + ce, gs.conv_window.data() + static_cast<size_t>(j) * C + cb);
    }
  };

  // One region, one work item per key head kh: the conv of its q and k channels and of the v
  // channels of its value heads (h = kh mod Hk), the L2 norms of q and k, then per value head the
  // delta rule (kernels/gdn.h) over the batch, the reverse path of a denoising block, and the gated
  // RMSNorm. The items share no channel, state or output row, and every step is the per-element
  // code of the separate regions this replaces, so the bits are theirs.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  {
    // Bytes: the state and the conv window, read once (and written back).
    const PartScope recurrence(PassPart::GdnRecurrence,
                               sizeof(float) * (gs.ssm.size() + gs.conv_window.size() + static_cast<size_t>(C) * K));
    // Each key head's state stays on one thread's core from step to step (parallel_for_owned).
    pool_.parallel_for_owned(Hk, 1, [&](int64_t kb, int64_t ke) {
      for (int64_t kh = kb; kh < ke; ++kh) {
        conv(kh * d, (kh + 1) * d);
        conv((Hk + kh) * d, (Hk + kh + 1) * d);
        for (int64_t h = kh; h < Hv; h += Hk) conv((2 * Hk + h) * d, (2 * Hk + h + 1) * d);
        for (int t = 0; t < T; ++t) {
          ops::l2_norm(s.conv_out.row(t) + kh * d, d, hp_.rms_eps);
          ops::l2_norm(s.conv_out.row(t) + (Hk + kh) * d, d, hp_.rms_eps);
        }
        for (int64_t h = kh; h < Hv; h += Hk) {
          float* S = gs.ssm.data() + h * d * d;  // S[j][i] = S_h[i][j]
          for (int t = 0; t < T; ++t) {
            const StepInputs in = step_inputs(s.conv_out, Hk, d, h, t, s.alpha.row(t)[h] + W.dt_bias[h], W.a[h], s.beta.row(t)[h]);
            kernels::gdn_step(S, in.q, in.k, in.v, in.decay, in.beta, scale, d, s.o.row(t) + h * d);
          }
          if (reverse) gdn_reverse_head(W, h, T);
          for (int t = 0; t < T; ++t) {  // gated RMSNorm of the head's output
            float* o = s.o.row(t) + h * d;
            ops::rms_norm(o, W.norm, o, d, hp_.rms_eps);
            float* z = s.z.row(t) + h * d;
            kernels::silu_row(z, z, d);  // a head's gate is one row of silu (ggml's view of z)
            for (int j = 0; j < d; ++j) o[j] *= z[j];
          }
        }
      }
    });
  }
  const PartScope part(PassPart::GdnOutput);  // (a stacked pass may defer it: ~0 here)
  linear(W.out, s.o.row(0), T, Hv * d, s.y.row(0));
}

// The reverse in-block path of value head h, added to s.o (CLOVER-SPEC 3.3). h_t is the layer's
// normed input (s.h), q/k/v the conv outputs of the forward path (s.conv_out, already
// L2-normalised), beta' and g' from s.rev_beta / s.rev_alpha.
//   beta'_t = sigmoid(Wrev_beta h_t),  g'_t = softplus(Wrev_alpha h_t + rev_dt_bias) * rev_a
//   R = 0;  for t = B-1 .. 0:  o[t] += R^T q_t / sqrt(d);  R = exp(g'_t) R;  R += k_t (x) ((v_t - R^T k_t) beta'_t)
void CpuExecutor::gdn_reverse_head(const model::GdnWeights& W, int64_t h, int T) {
  Scratch& s = *s_;
  const int Hk = hp_.gdn_k_heads, d = hp_.gdn_head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Scratch state per thread: which thread runs a head varies, so it cannot be indexed by thread.
  thread_local std::vector<float> R;
  R.assign(static_cast<size_t>(d) * d, 0.f);  // [d_v][d_k], rows contiguous as in the forward state
  for (int t = T - 1; t >= 0; --t) {
    const StepInputs in =
        step_inputs(s.conv_out, Hk, d, h, t, s.rev_alpha.row(t)[h] + W.rev_dt_bias[h], W.rev_a[h], s.rev_beta.row(t)[h]);
    kernels::gdn_step_reverse(R.data(), in.q, in.k, in.v, in.decay, in.beta, scale, d, s.o.row(t) + h * d);
  }
}

}  // namespace clover::backend::cpu
