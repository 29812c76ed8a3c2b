#include "model/state.h"

#include <algorithm>
#include <fmt/format.h>

namespace clover::model {

namespace {
void check_type(DType t, const char* which, const HParams& hp) {
  if (!kernels::kv_type_supported(t))
    throw ModelError(fmt::format("{} cache type {} is not supported (use f32, f16 or q8_0)", which, dtype_name(t)));
  if (hp.n_attn_layers() > 0 && !kernels::kv_type_fits(t, hp.head_dim))
    throw ModelError(fmt::format("{} cache type {} needs a head dimension that is a multiple of {} (this model: {})", which,
                                 dtype_name(t), dtype_block_size(t), hp.head_dim));
}
}  // namespace

void SequenceState::check_kv_types(const HParams& hp, KvTypes types) {
  check_type(types.k, "K", hp);
  check_type(types.v, "V", hp);
}

size_t SequenceState::recurrent_bytes_for(const HParams& hp) {
  const size_t per_layer = static_cast<size_t>(hp.conv_kernel - 1) * hp.gdn_qkv_dim() +
                           static_cast<size_t>(hp.gdn_v_heads) * hp.gdn_head_dim * hp.gdn_head_dim;
  return static_cast<size_t>(hp.n_gdn_layers()) * per_layer * sizeof(float);
}

SequenceState::SequenceState(const HParams& hp, int n_ctx_, KvTypes types_) : n_ctx(n_ctx_), types(types_) {
  check_kv_types(hp, types);
  if (hp.n_attn_layers() > 0) {
    k_head_bytes = dtype_row_bytes(types.k, hp.head_dim);
    v_head_bytes = dtype_row_bytes(types.v, hp.head_dim);
  }
  k_row_bytes = k_head_bytes * hp.n_head_kv;
  v_row_bytes = v_head_bytes * hp.n_head_kv;
  for (int il = 0; il < hp.n_layer; ++il) {
    if (hp.recurrent[il]) {
      slot.push_back(static_cast<int>(gdn.size()));
      GdnLayerState g;
      g.conv.assign(static_cast<size_t>(hp.conv_kernel - 1) * hp.gdn_qkv_dim(), 0.f);
      g.ssm.assign(static_cast<size_t>(hp.gdn_v_heads) * hp.gdn_head_dim * hp.gdn_head_dim, 0.f);
      gdn.push_back(std::move(g));
    } else {
      slot.push_back(static_cast<int>(k.size()));
      k.emplace_back(static_cast<size_t>(n_ctx) * k_row_bytes);
      v.emplace_back(static_cast<size_t>(n_ctx) * v_row_bytes);
    }
  }
}

kernels::KvHeadRef SequenceState::k_head(int kv_slot, int head) const {
  return {types.k, k[kv_slot].data() + static_cast<size_t>(head) * k_head_bytes, k_row_bytes};
}

kernels::KvHeadRef SequenceState::v_head(int kv_slot, int head) const {
  return {types.v, v[kv_slot].data() + static_cast<size_t>(head) * v_head_bytes, v_row_bytes};
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
  for (size_t i = 0; i < k.size(); ++i) n += k[i].size() + v[i].size();
  return n;
}

size_t SequenceState::kv_bytes_for(const HParams& hp, int64_t n_ctx, KvTypes types) {
  if (hp.n_attn_layers() == 0) return 0;
  const size_t per_pos = (dtype_row_bytes(types.k, hp.head_dim) + dtype_row_bytes(types.v, hp.head_dim)) * hp.n_head_kv;
  return static_cast<size_t>(hp.n_attn_layers()) * static_cast<size_t>(n_ctx) * per_pos;
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
