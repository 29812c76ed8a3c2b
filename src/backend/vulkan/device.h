// A logical Vulkan device: one compute queue, buffers with their memory booked in a MemoryAccount,
// upload/download through a staging buffer, and a timeline semaphore that orders submissions
// (each submit signals the next value; waiting for a value waits for that submit and all before).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "backend/vulkan/instance.h"
#include "backend/vulkan/memory.h"

namespace clover::vulkan {

class Device;

// Where a buffer lives. Device: device-local memory, filled and read through the staging buffer
// (even where device memory is host visible, as on lavapipe, so that path is always exercised).
// Host: host-visible coherent memory, mapped for the buffer's life (small readbacks such as the
// argmax result; uploads the host rewrites every pass).
enum class Residency { Device, Host };

// A storage buffer and its own memory allocation. Move-only; frees and unbooks on destruction.
// Sizes are rounded up to 4 bytes, because the shaders read every buffer as 32-bit words.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }          // usable bytes (as asked, rounded up to 4)
  uint64_t allocated() const { return allocated_; }  // bytes booked: the allocation's size
  Residency residency() const { return residency_; }
  // Host buffers only: the mapping.
  void* mapped() const { return mapped_; }
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }

 private:
  friend class Device;
  void release();
  Device* dev_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t size_ = 0, allocated_ = 0;
  MemoryPurpose purpose_ = MemoryPurpose::Scratch;
  Residency residency_ = Residency::Device;
  bool device_local_ = false;
  void* mapped_ = nullptr;
};

// A range of a buffer bound to one shader binding.
struct BufferRange {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;  // 0: to the end of the buffer
  uint64_t size() const { return bytes ? bytes : buffer->size() - offset; }  // the bytes it spans
};
inline BufferRange whole(const Buffer& b) { return {&b, 0, 0}; }

class PipelineCache;

class Device {
 public:
  // Opens device `index` of the instance (see Instance::resolve). Throws VulkanError.
  Device(const Instance& instance, int index);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  const DeviceFns& fn() const { return fn_; }
  VkDevice handle() const { return device_; }
  const Instance& instance() const { return instance_; }

  Buffer create_buffer(uint64_t bytes, MemoryPurpose purpose, Residency residency = Residency::Device);
  // Synchronous copies between host memory and a buffer (through the staging buffer for Device
  // buffers). offset and bytes multiples of 4.
  void upload(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes);
  void download(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes);
  void fill_zero(const Buffer& dst);
  // Synchronous device-side copy between two buffers (snapshots of the recurrent state).
  void copy_buffer(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes);

  const MemoryAccount& memory() const { return memory_; }

  // The most bytes one binding may span: the device's maxStorageBufferRange, or less when a test
  // lowers it to exercise the split paths (lavapipe's 128 MiB is too large to reach in a test).
  uint64_t binding_limit() const { return binding_limit_; }
  // Binding offsets are multiples of this: the device's minStorageBufferOffsetAlignment, at least a word.
  uint64_t offset_alignment() const { return info_.min_storage_offset_alignment > 4 ? info_.min_storage_offset_alignment : 4; }
  void set_binding_limit(uint64_t bytes);

  // Submits a recorded command buffer; returns the timeline value its completion signals.
  uint64_t submit(VkCommandBuffer cb);
  // Waits until the timeline reaches `value`, however long the work takes: a pass on a slow device
  // (lavapipe under load, a long prefill) can run for minutes, and giving up while it runs would
  // free buffers it still writes. A hung GPU is the driver's to report (VK_ERROR_DEVICE_LOST: a
  // VulkanError). After each wait_note_ns() of waiting a line on stderr says it is still waiting.
  void wait(uint64_t value);
  uint64_t wait_note_ns() const { return wait_note_ns_; }
  void set_wait_note_ns(uint64_t ns) { wait_note_ns_ = ns; }  // tests: a short interval
  uint64_t completed() const;

  VkCommandPool command_pool() const { return pool_; }
  // Bits of a timestamp the compute queue writes (0: no timestamps; profile.h).
  uint32_t timestamp_valid_bits() const { return timestamp_valid_bits_; }
  // Held while anything records into a command buffer of the pool or uses the staging buffer
  // (Vulkan requires the pool to be externally synchronised; a server's threads share the device).
  std::recursive_mutex& pool_mutex() { return pool_mutex_; }
  PipelineCache& pipelines() { return *pipelines_; }

 private:
  friend class Buffer;
  uint32_t memory_type(uint32_t type_bits, Residency residency, bool& device_local) const;
  // Records `record` between the barriers a one-off transfer needs, submits it and waits.
  void run_transfer(const std::function<void(VkCommandBuffer)>& record);
  void copy(VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t bytes);
  const Buffer& staging();  // created on first use

  const Instance& instance_;
  DeviceInfo info_;
  DeviceFns fn_;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  uint32_t timestamp_valid_bits_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer transfer_cb_ = VK_NULL_HANDLE;  // the one-off copies of upload/download
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  uint64_t next_value_ = 0;
  std::mutex submit_mutex_;
  std::recursive_mutex pool_mutex_;
  MemoryAccount memory_;
  uint64_t binding_limit_ = 0;
  uint64_t wait_note_ns_ = 60ull * 1000 * 1000 * 1000;
  Buffer staging_;
  std::unique_ptr<PipelineCache> pipelines_;
};

}  // namespace clover::vulkan
