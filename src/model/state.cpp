#include "model/state.h"

#include <algorithm>

namespace clover::model {

SequenceState::SequenceState(const HParams& hp, int n_ctx_) : n_ctx(n_ctx_) {
  const size_t kv_row = static_cast<size_t>(hp.n_head_kv) * hp.head_dim;
  for (int il = 0; il < hp.n_layer; ++il) {
    if (hp.recurrent[il]) {
      slot.push_back(static_cast<int>(gdn.size()));
      GdnLayerState g;
      g.conv.assign(static_cast<size_t>(hp.conv_kernel - 1) * hp.gdn_qkv_dim(), 0.f);
      g.ssm.assign(static_cast<size_t>(hp.gdn_v_heads) * hp.gdn_head_dim * hp.gdn_head_dim, 0.f);
      gdn.push_back(std::move(g));
    } else {
      slot.push_back(static_cast<int>(k.size()));
      k.emplace_back(static_cast<size_t>(n_ctx) * kv_row);
      v.emplace_back(static_cast<size_t>(n_ctx) * kv_row);
    }
  }
}

void SequenceState::reset() {
  n_past = 0;
  for (auto& g : gdn) {
    std::fill(g.conv.begin(), g.conv.end(), 0.f);
    std::fill(g.ssm.begin(), g.ssm.end(), 0.f);
  }
}

size_t SequenceState::kv_bytes() const {
  size_t n = 0;
  for (size_t i = 0; i < k.size(); ++i) n += (k[i].size() + v[i].size()) * sizeof(float);
  return n;
}

size_t SequenceState::recurrent_bytes() const {
  size_t n = 0;
  for (const auto& g : gdn) n += (g.conv.size() + g.ssm.size()) * sizeof(float);
  return n;
}

void SequenceState::copy_recurrent_from(const SequenceState& other) {
  for (size_t i = 0; i < gdn.size(); ++i) {
    gdn[i].conv = other.gdn[i].conv;
    gdn[i].ssm = other.gdn[i].ssm;
  }
}

}  // namespace clover::model
