// An exact account of the device memory the engine allocates: every vkAllocateMemory of the
// backend goes through Device::create_buffer, which books its allocationSize (what the driver
// really reserved, alignment padding included) under one purpose and unbooks it on free.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace clover::vulkan {

enum class MemoryPurpose { Weights, Cache, State, Scratch, Staging, Count };
std::string_view purpose_name(MemoryPurpose p);

// Thread-safe: buffers are made and freed from any thread (a server's sessions).
class MemoryAccount {
 public:
  void book(MemoryPurpose p, uint64_t bytes, bool device_local);
  void unbook(MemoryPurpose p, uint64_t bytes, bool device_local);
  uint64_t bytes(MemoryPurpose p) const { return read(bytes_[static_cast<size_t>(p)]); }
  uint64_t total() const { return read(total_); }
  uint64_t peak() const { return read(peak_); }
  uint64_t device_local() const { return read(device_local_); }
  uint64_t allocations() const { return read(allocations_); }

 private:
  uint64_t read(const uint64_t& v) const {
    std::lock_guard<std::mutex> lock(mu_);
    return v;
  }
  mutable std::mutex mu_;
  std::array<uint64_t, static_cast<size_t>(MemoryPurpose::Count)> bytes_{};
  uint64_t total_ = 0, peak_ = 0, device_local_ = 0, allocations_ = 0;
};

}  // namespace clover::vulkan
