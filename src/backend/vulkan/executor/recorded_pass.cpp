#include "backend/vulkan/executor/recorded_pass.h"

#include <iterator>

#include "backend/vulkan/executor/vulkan_sequence.h"

namespace clover::vulkan {

std::vector<int64_t> pass_key(std::span<const backend::Pass> passes, int64_t position_keyed_tokens) {
  std::vector<int64_t> key;
  key.reserve(8 * passes.size() + 1);
  key.push_back(static_cast<int64_t>(passes.size()));
  for (const backend::Pass& p : passes) {
    const auto& seq = static_cast<const VulkanSequence&>(*p.seq);
    const auto T = static_cast<int64_t>(p.tokens.size());
    const bool denoise = p.kind == backend::PassKind::Denoise;
    key.push_back(T);
    key.push_back((denoise ? 1 : 0) | (denoise && p.reverse_path ? 2 : 0));
    key.push_back(static_cast<int64_t>(seq.id()));
    key.push_back(T >= position_keyed_tokens ? seq.n_past() : -1);
    key.push_back(p.top_k);
    // The rows the head computes (their positions; where they land on the host is not recorded).
    const std::vector<backend::WantedRow> rows = backend::wanted_rows(p);
    key.push_back(static_cast<int64_t>(rows.size()));
    for (const backend::WantedRow& r : rows) key.push_back(r.pos);
  }
  return key;
}

RecordedPass* PassCache::find(const std::vector<int64_t>& key) {
  auto it = index_.find(key);
  if (it == index_.end() || !it->second->second.complete) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->second;
}

RecordedPass& PassCache::add(const std::vector<int64_t>& key) {
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
  } else if (lru_.size() < capacity_) {
    lru_.emplace_front(key, RecordedPass{});
    index_.emplace(key, lru_.begin());
  } else {
    // The least recently used recording gives up its key; its command lists are recorded anew.
    index_.erase(lru_.back().first);
    lru_.splice(lru_.begin(), lru_, std::prev(lru_.end()));
    lru_.front().first = key;
    index_.emplace(key, lru_.begin());
  }
  RecordedPass& r = lru_.front().second;
  r.complete = false;
  r.used = 0;
  return r;
}

}  // namespace clover::vulkan
