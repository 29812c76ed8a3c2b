// clover devices (alias --list-devices): the devices a model can run on, with what the Vulkan
// backend uses of each (memory heaps, subgroup size, shared memory, storage-buffer range,
// features). Without a Vulkan driver it says so and lists the CPU only.
#include <cstdio>
#include <fmt/format.h>
#include <string>

#include "backend/vulkan/instance.h"
#include "cli/commands.h"
#include "kernels/matmul.h"

namespace clover::cli {

namespace {

std::string mib(uint64_t bytes) { return fmt::format("{:.0f} MiB", static_cast<double>(bytes) / 1048576.0); }

void print_vulkan_device(const vulkan::DeviceInfo& d, bool is_default) {
  std::printf("vulkan:%d  %s (%s, Vulkan %u.%u.%u)%s\n", d.index, d.name.c_str(), vulkan::device_type_name(d.type),
              VK_API_VERSION_MAJOR(d.api_version), VK_API_VERSION_MINOR(d.api_version), VK_API_VERSION_PATCH(d.api_version),
              is_default ? "  [default]" : d.is_cpu() ? "  [CPU type: only when named]" : "");
  std::string heaps;
  for (size_t i = 0; i < d.heaps.size(); ++i)
    heaps += fmt::format("{}{}{}", i ? ", " : "", mib(d.heaps[i].size), d.heaps[i].device_local ? " device-local" : " host");
  std::printf("  memory heaps:        %s\n", heaps.c_str());
  std::printf("  subgroup size:       %u%s\n", d.subgroup_size, d.subgroup_arithmetic ? " (arithmetic ops)" : "");
  std::printf("  shared memory:       %u KiB per workgroup, %u invocations max\n", d.max_shared_memory / 1024,
              d.max_workgroup_invocations);
  std::printf("  storage buffer:      %s per binding (larger tensors are split), offsets aligned to %llu\n",
              mib(d.max_storage_buffer_range).c_str(), static_cast<unsigned long long>(d.min_storage_offset_alignment));
  std::printf("  largest allocation:  %s, push constants %u B\n", mib(d.max_allocation_size).c_str(), d.max_push_constants);
  std::printf("  features:            timeline semaphores %s, fp16 arithmetic %s, 8/16-bit storage %s/%s, "
              "buffer device address %s\n",
              d.timeline_semaphore ? "yes" : "no", d.shader_float16 ? "yes" : "no", d.storage_8bit ? "yes" : "no",
              d.storage_16bit ? "yes" : "no", d.buffer_device_address ? "yes" : "no");
  if (!d.usable()) std::printf("  not usable:          %s\n", d.unusable_reason().c_str());
}

}  // namespace

Runner add_devices_command(CLI::App& app) {
  app.add_subcommand("devices", "list the CPU and the Vulkan devices (alias: --list-devices)");
  return [] {
    std::printf("cpu       %s kernels\n", std::string(kernels::isa_name(kernels::isa_best())).c_str());
    std::string error;
    auto inst = vulkan::Instance::create({}, error);
    if (!inst) {
      std::printf("vulkan    none: %s\n", error.c_str());
      return 0;
    }
    if (inst->devices().empty()) std::printf("vulkan    no devices (the driver reports none)\n");
    const int def = inst->default_device();
    for (const auto& d : inst->devices()) print_vulkan_device(d, d.index == def);
    return 0;
  };
}

}  // namespace clover::cli
