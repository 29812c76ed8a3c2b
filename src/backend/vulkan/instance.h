// The Vulkan instance and what it knows about the machine's devices.
//
// Validation: the Khronos layer (VK_LAYER_KHRONOS_validation) is enabled when the options ask for
// it or CLOVER_VK_VALIDATE=1 is set; a debug messenger then counts every message the layer sends
// (errors, warnings, performance and info alike) and prints it to stderr, so a test can assert
// that a run produced none.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/vulkan/loader.h"

namespace clover::vulkan {

// Every failure of the backend (a Vulkan call, a missing feature, bad arguments) is one of these,
// with a message that names the call or the problem.
class VulkanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws VulkanError("<what>: <VkResult name>") unless r == VK_SUCCESS.
void vk_check(VkResult r, const char* what);

struct MemoryHeapInfo {
  uint64_t size = 0;
  bool device_local = false;
};

// What `clover devices` prints and what device selection and the shaders' limits use.
struct DeviceInfo {
  int index = 0;
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t api_version = 0;
  uint32_t vendor_id = 0;
  std::vector<MemoryHeapInfo> heaps;
  uint32_t subgroup_size = 0;
  uint32_t max_shared_memory = 0;         // maxComputeSharedMemorySize, bytes
  uint64_t max_storage_buffer_range = 0;  // bytes one storage-buffer binding may span
  uint64_t min_storage_offset_alignment = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_push_constants = 0;
  uint64_t max_allocation_size = 0;       // maxMemoryAllocationSize
  float timestamp_period_ns = 0;          // nanoseconds per timestamp tick (limits.timestampPeriod)
  bool has_compute_queue = false;
  // Features: required (timeline semaphores) and those the shaders may use later.
  bool timeline_semaphore = false;
  bool shader_float16 = false;
  bool storage_8bit = false;
  bool storage_16bit = false;
  bool buffer_device_address = false;
  bool subgroup_arithmetic = false;

  bool is_cpu() const { return type == VK_PHYSICAL_DEVICE_TYPE_CPU; }
  // The backend's needs: Vulkan 1.2, a compute queue, timeline semaphores.
  bool usable() const;
  // Why not usable() (empty when usable).
  std::string unusable_reason() const;
};

const char* device_type_name(VkPhysicalDeviceType t);

struct InstanceOptions {
  bool validate = false;  // also on when CLOVER_VK_VALIDATE=1
};

class Instance {
 public:
  // nullptr with `error` set when there is no loader, no driver or no instance ("no Vulkan
  // driver: ..."); the caller falls back to the CPU.
  static std::unique_ptr<Instance> create(const InstanceOptions& opt, std::string& error);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const std::vector<DeviceInfo>& devices() const { return devices_; }
  // The device a plain "vulkan" request gets: the first usable one that is not a CPU (lavapipe
  // runs only when named by index), or -1.
  int default_device() const;
  // Resolves a request: "" or "vulkan" -> default_device(); "N" or "vulkan:N" -> device N, a CPU
  // type allowed. Throws VulkanError naming the problem (no such index, device not usable).
  int resolve(const std::string& request) const;

  bool validation() const { return validation_; }
  // The layer's synchronization validation is on too (CLOVER_VK_SYNC_VALIDATION=0 turns it off).
  bool sync_validation() const { return sync_validation_; }
  // Messages the validation layer has sent since the instance was created.
  uint64_t validation_messages() const { return messages_.load(); }
  // True once the layer has greeted the instance (its status message at creation).
  bool validation_layer_active() const { return layer_active_.load(); }

  const VulkanFns& fns() const { return fns_; }
  VkInstance handle() const { return instance_; }
  VkPhysicalDevice physical(int index) const { return physical_.at(index); }

 private:
  Instance() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);
  void enumerate();

  VulkanFns fns_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool validation_ = false, sync_validation_ = false;
  std::atomic<uint64_t> messages_{0};
  std::atomic<bool> layer_active_{false};
  std::vector<VkPhysicalDevice> physical_;
  std::vector<DeviceInfo> devices_;
};

}  // namespace clover::vulkan
