// Expert routing of the MoE layers, as a pure unit shared by every backend, the CPU expert runner
// and the offload planner (reference/qwen35moe-gguf.md 5.3):
//
//   p = softmax(router logits) over all experts (ggml's terms and sum: kernels/vecmath.h)
//   E = top-k(p), ties to the lower expert id;  w_e = p_e / max(sum_{E} p, 2^-14) (sum in double)
//
// then the grouping of (token, slot) pairs by expert, so that an expert's weights are read once
// per pass for all the tokens routed to it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <vector>

namespace clover::backend {

// Routes T tokens: `probs` holds [T][n_expert] router logits and is turned into probabilities in
// place; chosen[t*k + j] is token t's j-th expert (by falling probability), weight[t*k + j] its
// renormalised weight.
void route_tokens(float* probs, int T, int n_expert, int k, int32_t* chosen, float* weight);

// The routed rows of a pass grouped by expert: rows of expert e are [first[e], first[e] + count[e]),
// in token order; row_of[t*k + j] is the row of (token t, slot j).
struct ExpertGroups {
  std::vector<int32_t> count, first;  // [n_expert]
  std::vector<int32_t> token;         // [T*k]: per row, its token
  std::vector<int32_t> row_of;        // [T*k]
  int32_t n_rows = 0;                 // T*k
  void group(const int32_t* chosen, int T, int k, int n_expert);
};

// Distinct experts chosen by tokens [t_begin, t_end) (`seen`: scratch of n_expert bytes).
int64_t distinct_experts(const int32_t* chosen, int t_begin, int t_end, int k, int n_expert, std::vector<uint8_t>& seen);

// One line per token: "layer position e1,e2,...,ek margin", margin = p(k-th chosen) - p(best not
// chosen): a margin near zero is a near-tie that rounding elsewhere can flip.
void write_routing_trace(std::FILE* f, int layer, int pos0, const float* probs, const int32_t* chosen, int T, int n_expert,
                         int k);

}  // namespace clover::backend
