// libvulkan loaded at run time (dlopen), so one clover binary runs with or without a Vulkan
// driver: the CPU path never touches this file, and a missing loader is an error message, not a
// failed program start. The function table is written here (VK_NO_PROTOTYPES: the headers give
// only the types); global functions come from vkGetInstanceProcAddr(nullptr), instance functions
// from the instance, device functions from vkGetDeviceProcAddr (no loader trampoline per call).
#pragma once
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>
#include <vector>

namespace clover::vulkan {

// X-lists: every function the backend calls, by the level it is fetched at.
#define CLOVER_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)           \
  X(vkEnumerateInstanceVersion) \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

#define CLOVER_VK_INSTANCE_FNS(X)              \
  X(vkDestroyInstance)                         \
  X(vkEnumeratePhysicalDevices)                \
  X(vkGetPhysicalDeviceProperties)             \
  X(vkGetPhysicalDeviceProperties2)            \
  X(vkGetPhysicalDeviceFeatures2)              \
  X(vkGetPhysicalDeviceMemoryProperties)       \
  X(vkGetPhysicalDeviceQueueFamilyProperties)  \
  X(vkEnumerateDeviceExtensionProperties)      \
  X(vkCreateDevice)                            \
  X(vkGetDeviceProcAddr)

// Present only when VK_EXT_debug_utils was enabled on the instance.
#define CLOVER_VK_DEBUG_FNS(X)        \
  X(vkCreateDebugUtilsMessengerEXT)   \
  X(vkDestroyDebugUtilsMessengerEXT)

#define CLOVER_VK_DEVICE_FNS(X)        \
  X(vkDestroyDevice)                   \
  X(vkGetDeviceQueue)                  \
  X(vkDeviceWaitIdle)                  \
  X(vkCreateBuffer)                    \
  X(vkDestroyBuffer)                   \
  X(vkGetBufferMemoryRequirements)     \
  X(vkAllocateMemory)                  \
  X(vkFreeMemory)                      \
  X(vkBindBufferMemory)                \
  X(vkMapMemory)                       \
  X(vkUnmapMemory)                     \
  X(vkFlushMappedMemoryRanges)         \
  X(vkInvalidateMappedMemoryRanges)    \
  X(vkCreateShaderModule)              \
  X(vkDestroyShaderModule)             \
  X(vkCreateDescriptorSetLayout)       \
  X(vkDestroyDescriptorSetLayout)      \
  X(vkCreatePipelineLayout)            \
  X(vkDestroyPipelineLayout)           \
  X(vkCreateComputePipelines)          \
  X(vkDestroyPipeline)                 \
  X(vkCreateDescriptorPool)            \
  X(vkDestroyDescriptorPool)           \
  X(vkAllocateDescriptorSets)          \
  X(vkResetDescriptorPool)             \
  X(vkUpdateDescriptorSets)            \
  X(vkCreateCommandPool)               \
  X(vkDestroyCommandPool)              \
  X(vkAllocateCommandBuffers)          \
  X(vkFreeCommandBuffers)              \
  X(vkBeginCommandBuffer)              \
  X(vkEndCommandBuffer)                \
  X(vkCmdBindPipeline)                 \
  X(vkCmdBindDescriptorSets)           \
  X(vkCmdPushConstants)                \
  X(vkCmdDispatch)                     \
  X(vkCmdPipelineBarrier)              \
  X(vkCmdCopyBuffer)                   \
  X(vkCmdFillBuffer)                   \
  X(vkQueueSubmit)                     \
  X(vkCreateSemaphore)                 \
  X(vkDestroySemaphore)                \
  X(vkWaitSemaphores)                  \
  X(vkGetSemaphoreCounterValue)        \
  X(vkCreateQueryPool)                 \
  X(vkDestroyQueryPool)                \
  X(vkCmdResetQueryPool)               \
  X(vkCmdWriteTimestamp)               \
  X(vkGetQueryPoolResults)

// The function table. One per process for global and instance functions (the backend creates one
// instance); device functions per logical device (struct DeviceFns).
struct VulkanFns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define CLOVER_VK_MEMBER(name) PFN_##name name = nullptr;
  CLOVER_VK_GLOBAL_FNS(CLOVER_VK_MEMBER)
  CLOVER_VK_INSTANCE_FNS(CLOVER_VK_MEMBER)
  CLOVER_VK_DEBUG_FNS(CLOVER_VK_MEMBER)
};

struct DeviceFns {
  CLOVER_VK_DEVICE_FNS(CLOVER_VK_MEMBER)
};
#undef CLOVER_VK_MEMBER

// Opens libvulkan (or the library CLOVER_VULKAN_LIBRARY names) and fills the global functions. Returns false with a message
// that names what is missing ("no Vulkan driver: libvulkan.so.1 not found ...") when it cannot.
bool load_vulkan(VulkanFns& fns, std::string& error);

// The shared libraries the process has loaded now (their paths).
std::vector<std::string> loaded_libraries();
// Keeps every library loaded since `before` (loaded_libraries() taken earlier) for the life of the
// process. The Vulkan loader loads the drivers at vkCreateInstance and unloads them at
// vkDestroyInstance; NVIDIA's driver, loaded and unloaded ~30 times in one process, stops
// initialising (vkCreateInstance then fails with VK_ERROR_INCOMPATIBLE_DRIVER: seen on an H200
// with driver 580.159), so a process that makes many instances (the test binaries) keeps it.
void keep_loaded_since(const std::vector<std::string>& before);
// Fills the instance-level (and, when present, debug-utils) functions.
bool load_instance_fns(VulkanFns& fns, VkInstance instance, std::string& error);
bool load_device_fns(const VulkanFns& fns, VkDevice device, DeviceFns& out, std::string& error);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and so on, for error messages.
const char* result_name(VkResult r);

}  // namespace clover::vulkan
