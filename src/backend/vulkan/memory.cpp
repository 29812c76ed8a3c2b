#include "backend/vulkan/memory.h"

#include <algorithm>

#include "backend/vulkan/instance.h"

namespace clover::vulkan {

std::string_view purpose_name(MemoryPurpose p) {
  switch (p) {
    case MemoryPurpose::Weights: return "weights";
    case MemoryPurpose::Cache: return "kv cache";
    case MemoryPurpose::State: return "recurrent state";
    case MemoryPurpose::Scratch: return "scratch";
    case MemoryPurpose::Staging: return "staging";
    case MemoryPurpose::Count: break;
  }
  return "?";
}

void MemoryAccount::book(MemoryPurpose p, uint64_t bytes, bool device_local) {
  std::lock_guard<std::mutex> lock(mu_);
  bytes_[static_cast<size_t>(p)] += bytes;
  total_ += bytes;
  if (device_local) device_local_ += bytes;
  ++allocations_;
  peak_ = std::max(peak_, total_);
}

void MemoryAccount::unbook(MemoryPurpose p, uint64_t bytes, bool device_local) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& b = bytes_[static_cast<size_t>(p)];
  if (b < bytes || total_ < bytes || allocations_ == 0)
    throw VulkanError("device memory account: freeing more than was allocated (a buffer freed twice?)");
  b -= bytes;
  total_ -= bytes;
  if (device_local) device_local_ -= bytes;
  --allocations_;
}

}  // namespace clover::vulkan
