// Mixture of experts with a gated shared expert (reference/qwen35moe-gguf.md 5.3).
//
//   p = softmax(Wr h);  E = top-k(p);  w_e = p_e / sum_{E} p          (backend/routing.h)
//   y = sum_{e in E} w_e down_e(silu(gate_e h) * up_e h)  +  sigmoid(w_sh . h) * down_sh(silu(gate_sh h) * up_sh h)
//
// Tokens are grouped by expert, so each expert's weights are read once per pass for all the
// tokens routed to it; the expert FFNs run in the CPU expert runner (experts.h), the shared
// expert as one more group that every token belongs to.
#include <algorithm>
#include <optional>

#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/pass_profile.h"
#include "backend/cpu/pass_scratch.h"
#include "model/ops.h"

namespace clover::backend::cpu {

void CpuExecutor::moe_layer(int il, int T) {
  Scratch& s = *s_;
  const model::MoeWeights& W = model_.weights().layers[il].moe;
  const int E = hp_.n_embd, NE = hp_.n_expert, k = hp_.n_expert_used;

  // The router and the shared expert's gate read the same input: one region.
  const Projection gates[] = {{&W.router, s.router.row(0)}, {&W.shared_gate_inp, s.shared_gamma.data()}};
  {
    const PartScope part(PassPart::Router);
    linears(gates, s.h.row(0), T, E);
  }
  std::optional<PartScope> routing(std::in_place, PassPart::Routing);
  route_tokens(s.router.row(0), T, NE, k, s.chosen.data(), s.chosen_w.data());
  if (routing_trace_) write_routing_trace(routing_trace_, il, chunk_pos0_, s.router.row(0), s.chosen.data(), T, NE, k);
  s.groups.group(s.chosen.data(), T, k, NE);
  for (const StatsSegment& seg : segments_) {
    seg.stats->expert_rows += static_cast<int64_t>(seg.row_end - seg.row_begin) * k;
    seg.stats->distinct_experts += distinct_experts(s.chosen.data(), seg.row_begin, seg.row_end, k, NE, s.seen);
  }

  // The routed experts with rows in this pass, then the shared expert (rows n_routed .. n_routed + T - 1).
  const int32_t n_routed = s.groups.n_rows;
  s.works.clear();
  for (int e = 0; e < NE; ++e)
    if (s.groups.count[e] > 0)
      s.works.push_back(ExpertWork{W.gate.expert(e), W.up.expert(e), W.down.expert(e), &s.groups.token[s.groups.first[e]],
                                   s.groups.count[e], s.groups.first[e]});
  const ExpertWork shared{W.shared_gate, W.shared_up, W.shared_down, s.experts.all_rows(), T, n_routed};
  routing.reset();
  {
    uint64_t bytes = 0;  // each expert's weights, read once per pass
    if (PassProfile::active())
      for (const ExpertWork& x : s.works) bytes += mat_bytes(x.gate) + mat_bytes(x.up) + mat_bytes(x.down);
    const PartScope part(PassPart::Experts, bytes + mat_bytes(shared.gate) + mat_bytes(shared.up) + mat_bytes(shared.down));
    s.experts.run(s.h.row(0), T, s.works, n_routed, hp_.n_ff_exp, &shared, hp_.n_ff_shexp);
  }
  const PartScope combine(PassPart::Combine);

  // The weighted sum with the shared expert's gate, in slot order for every token.
  for (int t = 0; t < T; ++t) {
    float* y = s.y.row(t);
    std::fill(y, y + E, 0.f);
    for (int j = 0; j < k; ++j) {
      const float wj = s.chosen_w[static_cast<size_t>(t) * k + j];
      const float* d = s.experts.out(s.groups.row_of[static_cast<size_t>(t) * k + j]);
      for (int i = 0; i < E; ++i) y[i] += wj * d[i];
    }
    const float gamma = model::ops::sigmoid(s.shared_gamma[t]);
    const float* d = s.experts.out(n_routed + t);
    for (int i = 0; i < E; ++i) y[i] += gamma * d[i];
  }
}

}  // namespace clover::backend::cpu
