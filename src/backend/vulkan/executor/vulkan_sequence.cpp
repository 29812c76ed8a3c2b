#include "backend/vulkan/executor/vulkan_sequence.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "model/model.h"

namespace clover::vulkan {

namespace {
uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }
std::atomic<uint64_t> next_id{1};
}  // namespace

VulkanSequence::VulkanSequence(Device& dev, const model::HParams& hp, int n_ctx, backend::KvTypes types, int first_layer)
    : dev_(dev), id_(next_id++), n_ctx_(n_ctx), types_(types) {
  backend::check_kv_types(hp, types);
  if (n_ctx < 1) throw model::ModelError(fmt::format("a sequence needs at least one position, not {}", n_ctx));
  if (hp.n_attn_layers() > 0) {
    k_head_bytes_ = dtype_row_bytes(types.k, hp.head_dim);
    v_head_bytes_ = dtype_row_bytes(types.v, hp.head_dim);
  }
  k_row_bytes_ = k_head_bytes_ * hp.n_head_kv;
  v_row_bytes_ = v_head_bytes_ * hp.n_head_kv;
  const uint64_t align = dev.offset_alignment();
  conv_bytes_ = static_cast<uint64_t>(hp.conv_kernel - 1) * hp.gdn_qkv_dim() * sizeof(float);
  ssm_bytes_ = static_cast<uint64_t>(hp.gdn_v_heads) * hp.gdn_head_dim * hp.gdn_head_dim * sizeof(float);
  uint64_t state = 0;
  for (int il = 0; il < hp.n_layer; ++il) {
    if (il < first_layer) {
      slot_.push_back(-1);
      continue;
    }
    if (hp.recurrent[il]) {
      slot_.push_back(static_cast<int>(conv_off_.size()));
      conv_off_.push_back(state);
      state = round_up(state + conv_bytes_, align);
      ssm_off_.push_back(state);
      state = round_up(state + ssm_bytes_, align);
      recurrent_bytes_ += conv_bytes_ + ssm_bytes_;
    } else {
      slot_.push_back(static_cast<int>(k_.size()));
      const uint64_t kb = static_cast<uint64_t>(n_ctx) * k_row_bytes_, vb = static_cast<uint64_t>(n_ctx) * v_row_bytes_;
      if (std::max(kb, vb) > dev.binding_limit())
        throw model::ModelError(fmt::format(
            "a KV cache of {} positions takes {} bytes per layer, more than this device binds at once ({}): use a "
            "shorter context (-c) or a smaller cache type (-ctk/-ctv q8_0)",
            n_ctx, std::max(kb, vb), dev.binding_limit()));
      k_.push_back(dev.create_buffer(kb, MemoryPurpose::Cache));
      v_.push_back(dev.create_buffer(vb, MemoryPurpose::Cache));
    }
  }
  if (state) {
    state_ = dev.create_buffer(state, MemoryPurpose::State);
    dev.fill_zero(state_);
  }
}

void VulkanSequence::reset() {
  n_past_ = 0;
  if (state_) dev_.fill_zero(state_);
}

void VulkanSequence::truncate(int n) {
  if (n < 0 || n > n_past_) throw model::ModelError(fmt::format("cannot truncate a sequence of {} tokens to {}", n_past_, n));
  if (n != n_past_ && state_)
    throw model::ModelError("the recurrent (GDN) state cannot be rewound: restore a snapshot instead of truncating");
  n_past_ = n;
}

void VulkanSequence::save(backend::Snapshot& into) const {
  auto& s = dynamic_cast<VulkanSnapshot&>(into);
  if (s.owner_ && s.owner_ != &dev_) throw model::ModelError("the snapshot belongs to another device");
  s.n_past_ = n_past_;
  s.bytes_ = recurrent_bytes_;
  s.owner_ = &dev_;
  if (!state_) return;
  if (!s.state_) s.state_ = dev_.create_buffer(state_.size(), MemoryPurpose::State);
  dev_.copy_buffer(state_, 0, s.state_, 0, state_.size());
}

void VulkanSequence::restore(const backend::Snapshot& from) {
  const auto& s = dynamic_cast<const VulkanSnapshot&>(from);
  if (s.owner_ != &dev_ || s.bytes_ != recurrent_bytes_)
    throw model::ModelError("the snapshot belongs to another sequence's model or device");
  n_past_ = s.n_past_;
  if (state_) dev_.copy_buffer(s.state_, 0, state_, 0, state_.size());
}

size_t VulkanSequence::kv_bytes() const {
  return (k_row_bytes_ + v_row_bytes_) * static_cast<size_t>(n_ctx_) * k_.size();
}

std::vector<uint8_t> VulkanSequence::committed_state() const {
  std::vector<uint8_t> out;
  auto append = [&](const Buffer& b, uint64_t offset, uint64_t bytes) {
    // Downloads move whole words; the caches' rows need not end on one.
    const uint64_t start = offset / 4 * 4, end = std::min<uint64_t>(b.size(), (offset + bytes + 3) / 4 * 4);
    std::vector<uint8_t> tmp(end - start);
    if (!tmp.empty()) dev_.download(b, start, tmp.data(), tmp.size());
    out.insert(out.end(), tmp.begin() + (offset - start), tmp.begin() + (offset - start + bytes));
  };
  for (size_t l = 0; l < k_.size(); ++l) {
    append(k_[l], 0, static_cast<uint64_t>(n_past_) * k_row_bytes_);
    append(v_[l], 0, static_cast<uint64_t>(n_past_) * v_row_bytes_);
  }
  for (size_t g = 0; g < conv_off_.size(); ++g) {
    append(state_, conv_off_[g], conv_bytes_);
    append(state_, ssm_off_[g], ssm_bytes_);
  }
  return out;
}

}  // namespace clover::vulkan
