// dlopen of libvulkan and the fill of the function tables (loader.h).
#include "backend/vulkan/loader.h"

#include <dlfcn.h>
#include <link.h>

#include <fmt/format.h>

#include <cstdlib>
#include <algorithm>
#include <vector>

namespace clover::vulkan {

namespace {

// The loader stays open for the life of the process (never dlclose'd: instances and devices may
// outlive any one owner, and unloading a driver under a live device is undefined); a repeated
// dlopen of a loaded library only takes a reference. CLOVER_VULKAN_LIBRARY names the loader to use
// instead of the system's (a loader brought along to a machine without one).
void* open_loader(std::string& error) {
  const char* forced = std::getenv("CLOVER_VULKAN_LIBRARY");
  std::vector<std::string> names;
  if (forced && *forced)
    names.push_back(forced);
  else
    names = {"libvulkan.so.1", "libvulkan.so"};
  std::string why;
  for (const std::string& name : names) {
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    why = e ? e : "unknown";
  }
  error = fmt::format("no Vulkan driver: {} could not be loaded ({}); install a Vulkan loader and driver (Debian: "
                      "libvulkan1 mesa-vulkan-drivers) or use the CPU",
                      names[0], why);
  return nullptr;
}

}  // namespace

bool load_vulkan(VulkanFns& fns, std::string& error) {
  void* lib = open_loader(error);
  if (!lib) return false;
  fns.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!fns.vkGetInstanceProcAddr) {
    error = "no Vulkan driver: libvulkan has no vkGetInstanceProcAddr";
    return false;
  }
#define CLOVER_VK_LOAD(name) fns.name = reinterpret_cast<PFN_##name>(fns.vkGetInstanceProcAddr(nullptr, #name));
  CLOVER_VK_GLOBAL_FNS(CLOVER_VK_LOAD)
#undef CLOVER_VK_LOAD
  if (!fns.vkCreateInstance || !fns.vkEnumerateInstanceVersion) {
    error = "no Vulkan driver: the Vulkan loader is older than 1.1 (no vkEnumerateInstanceVersion)";
    return false;
  }
  return true;
}

std::vector<std::string> loaded_libraries() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &names);
  std::sort(names.begin(), names.end());
  return names;
}

void keep_loaded_since(const std::vector<std::string>& before) {
  for (const std::string& name : loaded_libraries()) {
    if (std::binary_search(before.begin(), before.end(), name)) continue;
    // RTLD_NOLOAD: only a library already loaded; RTLD_NODELETE: never unloaded after this. The
    // reference this takes is never dropped either.
    dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

bool load_instance_fns(VulkanFns& fns, VkInstance instance, std::string& error) {
#define CLOVER_VK_LOAD(name)                                                                   \
  fns.name = reinterpret_cast<PFN_##name>(fns.vkGetInstanceProcAddr(instance, #name));         \
  if (!fns.name) {                                                                             \
    error = "Vulkan instance lacks " #name;                                                    \
    return false;                                                                              \
  }
  CLOVER_VK_INSTANCE_FNS(CLOVER_VK_LOAD)
#undef CLOVER_VK_LOAD
  // Optional: null unless the instance enabled VK_EXT_debug_utils.
  fns.vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      fns.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
  fns.vkDestroyDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
      fns.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
  return true;
}

bool load_device_fns(const VulkanFns& fns, VkDevice device, DeviceFns& out, std::string& error) {
#define CLOVER_VK_LOAD(name)                                                                   \
  out.name = reinterpret_cast<PFN_##name>(fns.vkGetDeviceProcAddr(device, #name));             \
  if (!out.name) {                                                                             \
    error = "Vulkan device lacks " #name " (the backend needs Vulkan 1.2)";                    \
    return false;                                                                              \
  }
  CLOVER_VK_DEVICE_FNS(CLOVER_VK_LOAD)
#undef CLOVER_VK_LOAD
  return true;
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult(other)";
  }
}

}  // namespace clover::vulkan
