// Mixture of experts with a gated shared expert (reference/qwen35moe-gguf.md 5.3).
//
//   p = softmax(Wr h) over all experts (ggml's terms and sum: kernels/vecmath.h);  E = top-k(p);  w_e = p_e / sum_{E} p
//   y = sum_{e in E} w_e down_e(silu(gate_e h) * up_e h)  +  sigmoid(w_sh . h) * down_sh(silu(gate_sh h) * up_sh h)
//
// Tokens are grouped by expert, so each expert's weights are read once per pass for all the
// tokens routed to it. The shared expert is one more group that every token belongs to. Work is
// split into (expert, output-row range) tasks so that one parallel region covers all experts.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/vecmath.h"
#include "model/forward.h"
#include "model/forward_scratch.h"
#include "model/ops.h"

namespace clover::model {

namespace {
constexpr int64_t kRowsPerTask = 64;

void add_tasks(std::vector<ExpertTask>& tasks, ExpertTask base, int64_t rows) {
  for (int64_t o = 0; o < rows; o += kRowsPerTask) {
    base.o_begin = o;
    base.o_end = std::min(rows, o + kRowsPerTask);
    tasks.push_back(base);
  }
}
}  // namespace

void Forward::moe_layer(int il, int T) {
  Scratch& s = *s_;
  const MoeWeights& W = model_.weights().layers[il].moe;
  const int E = hp_.n_embd, NE = hp_.n_expert, k = hp_.n_expert_used;

  // Routing: softmax over all experts, top-k, renormalise.
  linear(W.router, s.h.row(0), T, E, s.router.row(0));
  std::fill(s.expert_count.begin(), s.expert_count.end(), 0);
  for (int t = 0; t < T; ++t) {
    float* p = s.router.row(t);
    const float mx = *std::max_element(p, p + NE);
    const float inv_sum = static_cast<float>(1.0 / kernels::softmax_exp_row(p, p, NE, mx));
    for (int e = 0; e < NE; ++e) p[e] *= inv_sum;
    int32_t* ch = &s.chosen[static_cast<size_t>(t) * k];
    // Top-k by probability; ties go to the lower expert id.
    for (int j = 0; j < k; ++j) ch[j] = -1;
    for (int e = 0; e < NE; ++e) {
      int pos = k;
      while (pos > 0 && (ch[pos - 1] < 0 || p[e] > p[ch[pos - 1]])) --pos;
      if (pos < k) {
        for (int j = k - 1; j > pos; --j) ch[j] = ch[j - 1];
        ch[pos] = e;
      }
    }
    double wsum_d = 0.0;  // in double, as ggml's row sum
    for (int j = 0; j < k; ++j) wsum_d += static_cast<double>(p[ch[j]]);
    const float wsum = std::max(static_cast<float>(wsum_d), 6.103515625e-5f);
    for (int j = 0; j < k; ++j) {
      s.chosen_w[static_cast<size_t>(t) * k + j] = p[ch[j]] / wsum;
      ++s.expert_count[ch[j]];
    }
    if (routing_trace_) {
      float best_out = 0.f;
      for (int e = 0; e < NE; ++e)
        if (std::find(ch, ch + k, e) == ch + k) best_out = std::max(best_out, p[e]);
      std::fprintf(routing_trace_, "%d %d ", il, chunk_pos0_ + t);
      for (int j = 0; j < k; ++j) std::fprintf(routing_trace_, j ? ",%d" : "%d", ch[j]);
      std::fprintf(routing_trace_, " %.9g\n", p[ch[k - 1]] - best_out);
    }
  }

  // Group (token, slot) rows by expert: rows of expert e are [expert_first[e], +expert_count[e]).
  int32_t next = 0;
  for (int e = 0; e < NE; ++e) {
    s.expert_first[e] = next;
    next += s.expert_count[e];
  }
  const int32_t n_routed = next;
  {
    std::vector<int32_t>& fill = s.expert_count;  // reused as a cursor, restored below
    for (int e = 0; e < NE; ++e) fill[e] = 0;
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        const int e = s.chosen[static_cast<size_t>(t) * k + j];
        const int32_t row = s.expert_first[e] + fill[e]++;
        s.routed_token[row] = t;
        s.row_of[static_cast<size_t>(t) * k + j] = row;
      }
  }

  // Tasks: routed experts, then the shared expert (rows n_routed .. n_routed + T - 1).
  s.tasks.clear();
  int64_t distinct = 0;
  for (int e = 0; e < NE; ++e) {
    if (s.expert_count[e] == 0) continue;
    ++distinct;
    ExpertTask base{W.gate.expert(e), W.up.expert(e), W.down.expert(e), &s.routed_token[s.expert_first[e]],
                    s.expert_count[e], s.expert_first[e], 0, 0};
    add_tasks(s.tasks, base, hp_.n_ff_exp);
  }
  ExpertTask shared{W.shared_gate, W.shared_up, W.shared_down, s.iota.data(), T, n_routed, 0, 0};
  add_tasks(s.tasks, shared, hp_.n_ff_shexp);
  stats_.expert_rows += n_routed;
  stats_.distinct_experts += distinct;

  // Phase 1: act = silu(gate h) * up h for every routed row. The layer input is converted once
  // per activation type (files may mix weight types).
  s.in_acts.reset(s.h.row(0), T, E, E);
  const int64_t ff_ld = s.ffn_gate.cols;
  s.in_acts.prepare({W.gate.first.type, W.up.first.type, W.shared_gate.type, W.shared_up.type});
  // Routed experts sum as llama.cpp's MUL_MAT_ID does, the shared expert as its dense product.
  auto order = [](const kernels::MatRef& m, bool shared) {
    return shared ? kernels::sum_order(m.type, m.rows, m.cols) : kernels::SumOrder::VecDot;
  };
  pool_.parallel_for(static_cast<int64_t>(s.tasks.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const ExpertTask& tk = s.tasks[i];
      float* g = s.ffn_gate.row(tk.out_row);
      float* u = s.ffn_up.row(tk.out_row);
      const bool shared = tk.out_row >= n_routed;
      kernels::matmul_selected(tk.gate, s.in_acts.get(tk.gate.type), tk.tokens, tk.n, g, ff_ld, tk.o_begin, tk.o_end,
                               order(tk.gate, shared));
      kernels::matmul_selected(tk.up, s.in_acts.get(tk.up.type), tk.tokens, tk.n, u, ff_ld, tk.o_begin, tk.o_end,
                               order(tk.up, shared));
      const int64_t ff = shared ? hp_.n_ff_shexp : hp_.n_ff_exp;
      for (int32_t r = 0; r < tk.n; ++r) kernels::swiglu_span(g + r * ff_ld, u + r * ff_ld, ff, tk.o_begin, tk.o_end);
    }
  });

  // Phase 2: down projections. Routed rows and shared rows may have different widths and types.
  s.tasks.clear();
  for (int e = 0; e < NE; ++e) {
    if (s.expert_count[e] == 0) continue;
    ExpertTask base{{}, {}, W.down.expert(e), nullptr, s.expert_count[e], s.expert_first[e], 0, 0};
    add_tasks(s.tasks, base, E);
  }
  const size_t n_routed_down = s.tasks.size();
  add_tasks(s.tasks, ExpertTask{{}, {}, W.shared_down, nullptr, T, n_routed, 0, 0}, E);
  s.acts.convert(s.ffn_gate.row(0), n_routed, hp_.n_ff_exp, ff_ld, kernels::activation_type(W.down.first.type));
  s.acts2.convert(s.ffn_gate.row(n_routed), T, hp_.n_ff_shexp, ff_ld, kernels::activation_type(W.shared_down.type));
  pool_.parallel_for(static_cast<int64_t>(s.tasks.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const ExpertTask& tk = s.tasks[i];
      const bool is_shared = static_cast<size_t>(i) >= n_routed_down;
      const kernels::ActRows& a = is_shared ? s.acts2 : s.acts;
      const int32_t first = is_shared ? 0 : tk.out_row;
      kernels::matmul_selected(tk.down, a, s.iota.data() + first, tk.n, s.ffn_down.row(tk.out_row), E, tk.o_begin, tk.o_end,
                               order(tk.down, is_shared));
    }
  });

  // Shared-expert gate and the weighted sum, in slot order for every token.
  linear(W.shared_gate_inp, s.h.row(0), T, E, s.shared_gamma.data());
  for (int t = 0; t < T; ++t) {
    float* y = s.y.row(t);
    std::fill(y, y + E, 0.f);
    for (int j = 0; j < k; ++j) {
      const float wj = s.chosen_w[static_cast<size_t>(t) * k + j];
      const float* d = s.ffn_down.row(s.row_of[static_cast<size_t>(t) * k + j]);
      for (int i = 0; i < E; ++i) y[i] += wj * d[i];
    }
    const float gamma = ops::sigmoid(s.shared_gamma[t]);
    const float* d = s.ffn_down.row(n_routed + t);
    for (int i = 0; i < E; ++i) y[i] += gamma * d[i];
  }
}

}  // namespace clover::model
