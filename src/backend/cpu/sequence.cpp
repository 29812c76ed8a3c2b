#include "backend/cpu/sequence.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace clover::backend::cpu {

size_t CpuSnapshot::bytes() const {
  size_t n = 0;
  for (const auto& g : gdn_) n += (g.conv_window.size() + g.ssm.size()) * sizeof(float);
  return n;
}

CpuSequence::CpuSequence(const model::HParams& hp, int n_ctx, KvTypes types, int n_layers) : n_ctx_(n_ctx), types_(types) {
  check_kv_types(hp, types);
  if (hp.n_attn_layers() > 0) {
    k_head_bytes_ = dtype_row_bytes(types.k, hp.head_dim);
    v_head_bytes_ = dtype_row_bytes(types.v, hp.head_dim);
  }
  k_row_bytes_ = k_head_bytes_ * hp.n_head_kv;
  v_row_bytes_ = v_head_bytes_ * hp.n_head_kv;
  const int L = n_layers < 0 ? hp.n_layer : std::min(n_layers, hp.n_layer);
  for (int il = 0; il < L; ++il) {
    if (hp.recurrent[il]) {
      slot_.push_back(static_cast<int>(gdn_.size()));
      GdnLayerState g;
      g.conv_window.assign(static_cast<size_t>(hp.conv_kernel - 1) * hp.gdn_qkv_dim(), 0.f);
      g.ssm.assign(static_cast<size_t>(hp.gdn_v_heads) * hp.gdn_head_dim * hp.gdn_head_dim, 0.f);
      gdn_.push_back(std::move(g));
    } else {
      slot_.push_back(static_cast<int>(k_.size()));
      k_.emplace_back(static_cast<size_t>(n_ctx) * k_row_bytes_);
      v_.emplace_back(static_cast<size_t>(n_ctx) * v_row_bytes_);
    }
  }
}

kernels::KvHeadRef CpuSequence::k_head(int kv_slot, int head) const {
  return {types_.k, k_[kv_slot].data() + static_cast<size_t>(head) * k_head_bytes_, k_row_bytes_};
}

kernels::KvHeadRef CpuSequence::v_head(int kv_slot, int head) const {
  return {types_.v, v_[kv_slot].data() + static_cast<size_t>(head) * v_head_bytes_, v_row_bytes_};
}

void CpuSequence::reset() {
  n_past_ = 0;
  for (auto& g : gdn_) {
    std::fill(g.conv_window.begin(), g.conv_window.end(), 0.f);
    std::fill(g.ssm.begin(), g.ssm.end(), 0.f);
  }
}

void CpuSequence::truncate(int n) {
  if (n < 0 || n > n_past_) throw model::ModelError(fmt::format("cannot truncate a sequence of {} tokens to {}", n_past_, n));
  if (n != n_past_ && !gdn_.empty())
    throw model::ModelError("the recurrent (GDN) state cannot be rewound: restore a snapshot instead of truncating");
  n_past_ = n;
}

void CpuSequence::save(Snapshot& into) const {
  auto& s = dynamic_cast<CpuSnapshot&>(into);
  s.n_past_ = n_past_;
  s.gdn_.resize(gdn_.size());
  for (size_t i = 0; i < gdn_.size(); ++i) {
    s.gdn_[i].conv_window = gdn_[i].conv_window;  // same sizes every time: no allocation once warm
    s.gdn_[i].ssm = gdn_[i].ssm;
  }
}

void CpuSequence::restore(const Snapshot& from) {
  const auto& s = dynamic_cast<const CpuSnapshot&>(from);
  if (s.gdn_.size() != gdn_.size()) throw model::ModelError("the snapshot belongs to another model");
  n_past_ = s.n_past_;
  for (size_t i = 0; i < gdn_.size(); ++i) {
    gdn_[i].conv_window = s.gdn_[i].conv_window;
    gdn_[i].ssm = s.gdn_[i].ssm;
  }
}

size_t CpuSequence::kv_bytes() const {
  size_t n = 0;
  for (size_t i = 0; i < k_.size(); ++i) n += k_[i].size() + v_[i].size();
  return n;
}

size_t CpuSequence::recurrent_bytes() const {
  size_t n = 0;
  for (const auto& g : gdn_) n += (g.conv_window.size() + g.ssm.size()) * sizeof(float);
  return n;
}

std::vector<uint8_t> CpuSequence::committed_state() const {
  std::vector<uint8_t> out;
  auto append = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  for (size_t l = 0; l < k_.size(); ++l) {
    append(k_[l].data(), static_cast<size_t>(n_past_) * k_row_bytes_);
    append(v_[l].data(), static_cast<size_t>(n_past_) * v_row_bytes_);
  }
  for (const auto& g : gdn_) {
    append(g.conv_window.data(), g.conv_window.size() * sizeof(float));
    append(g.ssm.data(), g.ssm.size() * sizeof(float));
  }
  return out;
}

}  // namespace clover::backend::cpu
