// Gated full attention (qwen35moe "full attention" layers; reference/qwen35moe-gguf.md 5.1).
//
//   qg = Wq h            per head [query(hd) | gate(hd)]
//   q  = rope(rms(query, q_norm)),  k = rope(rms(Wk h, k_norm)),  v = Wv h      (GQA: n_head_kv heads)
//   o  = softmax(q k^T / sqrt(hd)) v  *  sigmoid(gate)          over the cached prefix and, causally,
//                                                               the batch (a denoising pass: the whole block)
//   y  = Wo o
//
// K and V go to the cache in its type (f32, f16 or q8_0); the softmax runs in the tiled kernel
// (kernels/attention.h), whose memory does not grow with the context.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "kernels/attention.h"
#include "kernels/convert.h"
#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/pass_profile.h"
#include "backend/cpu/pass_scratch.h"
#include "model/ops.h"

namespace clover::backend::cpu {

namespace ops = model::ops;

namespace {

// One position's K or V for every KV head ([nkv][hd] floats) in the cache's type. Q8_0 rounds
// as ggml-cpu's f32 -> q8_0 copy does (its SIMD quantiser, the one activations see).
void store_kv_row(DType type, const float* src, uint8_t* dst, int nkv, int hd) {
  if (type == DType::Q8_0)
    kernels::quantize_row_q8_0_activation(src, reinterpret_cast<BlockQ8_0*>(dst), static_cast<int64_t>(nkv) * hd);
  else
    kernels::quantize_row(type, src, dst, static_cast<int64_t>(nkv) * hd);
}

}  // namespace

void CpuExecutor::attention_layer(int il, CpuSequence& seq, int T, PassKind kind) {
  Scratch& s = *s_;
  const model::AttentionWeights& W = model_.weights().layers[il].attn;
  const int hd = hp_.head_dim, nh = hp_.n_head, nkv = hp_.n_head_kv;
  const int slot = seq.layer_slot(il);
  const int64_t n_past = seq.n_past();

  const Projection qkv[] = {{&W.q, s.qg.row(0)},  // [T][nh * 2hd]
                           {&W.k, s.k.row(0)},   // [T][nkv * hd]
                           {&W.v, s.v.row(0)}};
  {
    const PartScope part(PassPart::AttnProjections);  // (a stacked pass ran them already: ~0 here)
    linears(qkv, s.h.row(0), T, hp_.n_embd);
  }
  // Bytes: every cached position the pass's last row sees, K and V, read once at least.
  const uint64_t cache_bytes = static_cast<uint64_t>(n_past + T) * (dtype_row_bytes(seq.types().k, static_cast<int64_t>(nkv) * hd) +
                                                                    dtype_row_bytes(seq.types().v, static_cast<int64_t>(nkv) * hd));
  std::optional<PartScope> core(std::in_place, PassPart::AttnCore, cache_bytes);

  // Per-head norms and rope; K and V go to the cache at their positions, in the cache's types.
  pool_.parallel_for(T, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t pos = n_past + t;
      for (int h = 0; h < nh; ++h) {
        float* q = s.q.row(t) + h * hd;
        ops::rms_norm(s.qg.row(t) + h * 2 * hd, W.q_norm, q, hd, hp_.rms_eps);
        ops::rope_neox(q, hp_.n_rot, pos, hp_.rope_theta);
      }
      float* kt = s.k.row(t);
      for (int h = 0; h < nkv; ++h) {
        ops::rms_norm(kt + h * hd, W.k_norm, kt + h * hd, hd, hp_.rms_eps);
        ops::rope_neox(kt + h * hd, hp_.n_rot, pos, hp_.rope_theta);
      }
      store_kv_row(seq.types().k, kt, seq.k_row(slot, pos), nkv, hd);
      store_kv_row(seq.types().v, s.v.row(t), seq.v_row(slot, pos), nkv, hd);
    }
  });

  // Work items: (KV head, run of tokens); an item's rows are the group's query heads for each of
  // its tokens (GQA: they all read the same K/V). Items are taken one at a time from the pool's
  // counter (under the causal mask later tokens see more keys, so fixed ranges would load the
  // last thread most), and a thread that lost its core is not waited for: a decode step's few
  // items then run on the caller alone instead of costing a scheduler time slice.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int group = nh / nkv;
  const int tokens_per_item = std::max(1, kernels::kAttnMaxRows / group);
  const int rows_per_item = std::min(kernels::kAttnMaxRows, group);  // per token: heads of one group, in calls
  const int64_t runs = (T + tokens_per_item - 1) / tokens_per_item;
  const int64_t n_items = nkv * runs;
  pool_.parallel_for_on(n_items, 1, [&](int thread, int64_t item_begin, int64_t item_end) {
    kernels::AttentionScratch& scratch = s.attn_scratch[thread];
    const float* q[kernels::kAttnMaxRows];
    float* o[kernels::kAttnMaxRows];
    int64_t n_keys[kernels::kAttnMaxRows];
    for (int64_t item = item_begin; item < item_end; ++item) {
      const int kvh = static_cast<int>(item % nkv);
      const int t0 = static_cast<int>(item / nkv) * tokens_per_item;
      const int t1 = std::min(T, t0 + tokens_per_item);
      const kernels::KvHeadRef K = seq.k_head(slot, kvh), V = seq.v_head(slot, kvh);
      // Heads of the group in calls of at most kAttnMaxRows rows (a group larger than a call).
      for (int h0 = 0; h0 < group; h0 += rows_per_item) {
        const int h1 = std::min(group, h0 + rows_per_item);
        kernels::AttentionRows rows;
        int n = 0;
        for (int t = t0; t < t1; ++t) {
          const int64_t keys = kind == PassKind::Denoise ? n_past + T : n_past + t + 1;
          for (int hh = h0; hh < h1; ++hh) {
            const int h = kvh * group + hh;
            q[n] = s.q.row(t) + h * hd;
            o[n] = s.attn.row(t) + h * hd;
            n_keys[n] = keys;
            ++n;
          }
        }
        rows.q = q, rows.o = o, rows.n_keys = n_keys, rows.n = n;
        kernels::attention(rows, hd, scale, K, V, scratch);
        // Output gate, in the same item (one parallel region less per layer, which matters for decode).
        for (int t = t0, r = 0; t < t1; ++t)
          for (int hh = h0; hh < h1; ++hh, ++r) {
            const float* gate = s.qg.row(t) + (kvh * group + hh) * 2 * hd + hd;
            for (int d = 0; d < hd; ++d) o[r][d] *= ops::sigmoid(gate[d]);
          }
      }
    }
  });
  core.reset();

  const PartScope part(PassPart::AttnOutput);  // (a stacked pass may defer it: ~0 here)
  linear(W.o, s.attn.row(0), T, nh * hd, s.y.row(0));
}

}  // namespace clover::backend::cpu
