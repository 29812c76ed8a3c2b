// Instance creation, the validation messenger and device enumeration (instance.h).
#include "backend/vulkan/instance.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

namespace clover::vulkan {

void vk_check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw VulkanError(fmt::format("{}: {}", what, result_name(r)));
}

const char* device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

bool DeviceInfo::usable() const { return unusable_reason().empty(); }

std::string DeviceInfo::unusable_reason() const {
  if (api_version < VK_API_VERSION_1_2)
    return fmt::format("Vulkan {}.{} (the backend needs 1.2)", VK_API_VERSION_MAJOR(api_version),
                       VK_API_VERSION_MINOR(api_version));
  if (!has_compute_queue) return "no compute queue";
  if (!timeline_semaphore) return "no timeline semaphores";
  return "";
}

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") != 0 && *v;
}

bool has_layer(const VulkanFns& f, const char* name) {
  uint32_t n = 0;
  if (f.vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  f.vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

// An instance extension of the implementation, or of `layer` when given.
bool has_instance_extension(const VulkanFns& f, const char* name, const char* layer = nullptr) {
  uint32_t n = 0;
  if (f.vkEnumerateInstanceExtensionProperties(layer, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> ext(n);
  f.vkEnumerateInstanceExtensionProperties(layer, &n, ext.data());
  for (const auto& e : ext)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

}  // namespace

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  // The loader reports its layer and driver search as general info/verbose messages; those say
  // nothing about the engine's use of Vulkan. Everything else is counted and printed.
  const bool about_us = (types & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                  VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)) != 0 ||
                        severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
  if (!about_us) return VK_FALSE;
  auto* self = static_cast<Instance*>(user);
  // The layer's greeting at vkCreateInstance: proof that validation is really on, not a problem.
  if (data && data->pMessageIdName &&
      std::strcmp(data->pMessageIdName, "UNASSIGNED-khronos-validation-createinstance-status-message") == 0) {
    self->layer_active_.store(true);
    return VK_FALSE;
  }
  // The layer's own shader-validation cache in $HOME (absent on a fresh machine, so the first
  // validated process of a CI run reads none): about the layer's files, not the engine's calls.
  if (data && data->pMessageIdName && std::strcmp(data->pMessageIdName, "UNASSIGNED-cache-file-error") == 0) {
    return VK_FALSE;
  }
  self->messages_.fetch_add(1);
  const char* level = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT     ? "error"
                      : severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT ? "warning"
                      : severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT    ? "info"
                                                                                    : "verbose";
  std::fprintf(stderr, "vulkan validation %s: %s\n", level, data && data->pMessage ? data->pMessage : "(no text)");
  return VK_FALSE;
}

std::unique_ptr<Instance> Instance::create(const InstanceOptions& opt, std::string& error) {
  std::unique_ptr<Instance> inst(new Instance());
  VulkanFns& f = inst->fns_;
  if (!load_vulkan(f, error)) return nullptr;

  uint32_t loader_version = 0;
  f.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2) {
    error = fmt::format("no Vulkan driver: the Vulkan loader is {}.{}, the backend needs 1.2",
                        VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));
    return nullptr;
  }

  const bool want_validation = opt.validate || env_flag("CLOVER_VK_VALIDATE");
  std::vector<const char*> layers, extensions;
  if (want_validation) {
    if (!has_layer(f, kValidationLayer)) {
      error = "Vulkan validation was asked for (CLOVER_VK_VALIDATE=1 or a test) but VK_LAYER_KHRONOS_validation is "
              "not installed (Debian: vulkan-validationlayers)";
      return nullptr;
    }
    if (!has_instance_extension(f, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
      error = "Vulkan validation needs VK_EXT_debug_utils, which this loader lacks";
      return nullptr;
    }
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  // Synchronization validation too (the layer's hazard tracker: a missing barrier between a
  // write and a read of the same bytes is a message), unless CLOVER_VK_SYNC_VALIDATION=0.
  const char* sync_env = std::getenv("CLOVER_VK_SYNC_VALIDATION");
  const bool want_sync = want_validation && !(sync_env && std::strcmp(sync_env, "0") == 0) &&
                         has_instance_extension(f, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME, kValidationLayer);
  if (want_sync) extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "clover";
  app.pEngineName = "clover.cpp";
  app.apiVersion = VK_API_VERSION_1_2;

  // Every severity and type (on_message drops only the loader's general chatter): a test asserts
  // the count is zero.
  VkDebugUtilsMessengerCreateInfoEXT dbg{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  dbg.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_VERBOSE_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  dbg.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  dbg.pfnUserCallback = &Instance::on_message;
  dbg.pUserData = inst.get();

  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  if (want_validation) ci.pNext = &dbg;  // also catches messages of vkCreateInstance itself
  const VkValidationFeatureEnableEXT sync_feature = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync_feature;
  if (want_sync) {
    features.pNext = &dbg;
    ci.pNext = &features;
  }
  const std::vector<std::string> before = loaded_libraries();
  const VkResult r = f.vkCreateInstance(&ci, nullptr, &inst->instance_);
  keep_loaded_since(before);  // the drivers (and layers) just loaded stay: loader.h says why
  if (r != VK_SUCCESS) {
    error = fmt::format("no Vulkan driver: vkCreateInstance failed ({})", result_name(r));
    return nullptr;
  }
  if (!load_instance_fns(f, inst->instance_, error)) return nullptr;
  if (want_validation) {
    if (!f.vkCreateDebugUtilsMessengerEXT) {
      error = "Vulkan validation: vkCreateDebugUtilsMessengerEXT missing";
      return nullptr;
    }
    vk_check(f.vkCreateDebugUtilsMessengerEXT(inst->instance_, &dbg, nullptr, &inst->messenger_),
             "vkCreateDebugUtilsMessengerEXT");
    inst->validation_ = true;
    inst->sync_validation_ = want_sync;
  }
  inst->enumerate();
  return inst;
}

Instance::~Instance() {
  if (messenger_) fns_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_) fns_.vkDestroyInstance(instance_, nullptr);
}

void Instance::enumerate() {
  uint32_t n = 0;
  vk_check(fns_.vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
  physical_.resize(n);
  vk_check(fns_.vkEnumeratePhysicalDevices(instance_, &n, physical_.data()), "vkEnumeratePhysicalDevices");
  physical_.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    VkPhysicalDevice pd = physical_[i];
    DeviceInfo d;
    d.index = static_cast<int>(i);

    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties maint3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    subgroup.pNext = &maint3;
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &subgroup;
    fns_.vkGetPhysicalDeviceProperties2(pd, &props);
    const VkPhysicalDeviceLimits& lim = props.properties.limits;
    d.name = props.properties.deviceName;
    d.type = props.properties.deviceType;
    d.api_version = props.properties.apiVersion;
    d.vendor_id = props.properties.vendorID;
    d.subgroup_size = subgroup.subgroupSize;
    d.subgroup_arithmetic = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0 &&
                            (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
    d.max_shared_memory = lim.maxComputeSharedMemorySize;
    d.max_storage_buffer_range = lim.maxStorageBufferRange;
    d.min_storage_offset_alignment = lim.minStorageBufferOffsetAlignment;
    d.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
    d.max_push_constants = lim.maxPushConstantsSize;
    d.max_allocation_size = maint3.maxMemoryAllocationSize;
    d.timestamp_period_ns = lim.timestampPeriod;

    VkPhysicalDeviceMemoryProperties mem;
    fns_.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
      d.heaps.push_back({mem.memoryHeaps[h].size, (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});

    uint32_t nq = 0;
    fns_.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    fns_.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf.data());
    for (const auto& q : qf)
      if (q.queueFlags & VK_QUEUE_COMPUTE_BIT) d.has_compute_queue = true;

    if (d.api_version >= VK_API_VERSION_1_2) {
      VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
      VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
      f12.pNext = &f11;
      VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      feats.pNext = &f12;
      fns_.vkGetPhysicalDeviceFeatures2(pd, &feats);
      d.timeline_semaphore = f12.timelineSemaphore;
      d.shader_float16 = f12.shaderFloat16;
      d.storage_8bit = f12.storageBuffer8BitAccess;
      d.storage_16bit = f11.storageBuffer16BitAccess;
      d.buffer_device_address = f12.bufferDeviceAddress;
    }
    devices_.push_back(std::move(d));
  }
}

int Instance::default_device() const {
  for (const auto& d : devices_)
    if (d.usable() && !d.is_cpu()) return d.index;
  return -1;
}

int Instance::resolve(const std::string& request) const {
  std::string r = request;
  if (r.rfind("vulkan", 0) == 0) r = r.substr(6);
  if (!r.empty() && r[0] == ':') r = r.substr(1);
  if (r.empty()) {
    const int d = default_device();
    if (d < 0) {
      bool cpu = false;
      for (const auto& dev : devices_) cpu = cpu || dev.is_cpu();
      throw VulkanError(cpu ? "no Vulkan GPU found (a CPU-type Vulkan device such as lavapipe runs only when named: "
                              "--device vulkan:N, see `clover devices`)"
                            : "no Vulkan device found");
    }
    return d;
  }
  char* end = nullptr;
  const long idx = std::strtol(r.c_str(), &end, 10);
  if (*end || idx < 0) throw VulkanError(fmt::format("bad Vulkan device '{}': expected vulkan or vulkan:N", request));
  if (idx >= static_cast<long>(devices_.size()))
    throw VulkanError(fmt::format("Vulkan device {} does not exist ({} found; see `clover devices`)", idx,
                                  devices_.size()));
  const DeviceInfo& d = devices_[idx];
  if (!d.usable()) throw VulkanError(fmt::format("Vulkan device {} ({}) cannot run the backend: {}", idx, d.name,
                                                 d.unusable_reason()));
  return static_cast<int>(idx);
}

}  // namespace clover::vulkan
