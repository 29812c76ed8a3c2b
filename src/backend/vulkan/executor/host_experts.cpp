#include "backend/vulkan/executor/host_experts.h"

#include <algorithm>
#include <thread>

namespace clover::vulkan {

HostExperts::HostExperts(const model::Model& model, int max_tokens, int n_threads)
    : model_(model),
      pool_(n_threads > 0 ? n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      runner_(pool_, static_cast<int64_t>(max_tokens) * std::max(1, model.hp().n_expert_used), model.hp().n_embd,
              model.hp().n_ff_exp) {}

void HostExperts::run(int il, const float* x, int N, const int32_t* groups, const std::vector<bool>& on_host) {
  const model::HParams& hp = model_.hp();
  const model::MoeWeights& W = model_.weights().layers[il].moe;
  const int NE = hp.n_expert, k = hp.n_expert_used;
  const int32_t* count = groups;
  const int32_t* first = groups + NE;
  const int32_t* token = groups + 2 * NE;
  works_.clear();
  for (int e = 0; e < NE; ++e)
    if (count[e] > 0 && on_host[e]) works_.push_back({W.gate.expert(e), W.up.expert(e), W.down.expert(e), token + first[e], count[e], first[e]});
  runner_.run(x, N, works_, N * k, hp.n_ff_exp, nullptr, 0);
}

}  // namespace clover::vulkan
