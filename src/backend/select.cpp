// The backend factory: which executor runs the model, from the options.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cpu/cpu_executor.h"
#include "backend/executor.h"
#include "backend/vulkan/executor/vulkan_executor.h"

namespace clover::backend {

namespace {

std::unique_ptr<Executor> make_cpu(const model::Model& model, const ExecutorOptions& opts) {
  cpu::CpuExecutor::Options o;
  o.n_threads = opts.n_threads;
  o.max_batch = opts.max_batch;
  return std::make_unique<cpu::CpuExecutor>(model, o);
}

std::unique_ptr<Executor> make_vulkan(const model::Model& model, const ExecutorOptions& opts, const std::string& device) {
  vulkan::VulkanExecutor::Options o;
  o.device = device;
  o.max_batch = opts.max_batch;
  const char* v = std::getenv("CLOVER_VK_VALIDATE");
  o.validate = v && std::string(v) == "1";
  return std::make_unique<vulkan::VulkanExecutor>(model, o);
}

}  // namespace

std::unique_ptr<Executor> make_executor(const model::Model& model, const ExecutorOptions& opts) {
  std::string dev = opts.device.empty() ? "auto" : opts.device;
  std::transform(dev.begin(), dev.end(), dev.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const int n_layer = model.hp().n_layer;
  if (opts.n_gpu_layers < -1) throw model::ModelError(fmt::format("-ngl {}: give a layer count (0: the CPU, 99: all)", opts.n_gpu_layers));
  const bool all_layers = opts.n_gpu_layers < 0 || opts.n_gpu_layers >= n_layer;
  if (dev != "cpu" && opts.n_gpu_layers == 0) {
    std::fprintf(stderr, "-ngl 0: every layer runs on the CPU\n");
    dev = "cpu";
  }
  if (dev != "cpu" && !all_layers)
    throw model::ModelError(fmt::format(
        "-ngl {}: splitting the layers between the GPU and the CPU is not implemented yet (this model has {} layers): use "
        "-ngl 0 for the CPU or -ngl 99 for every layer on the GPU",
        opts.n_gpu_layers, n_layer));
  if (dev == "cpu") return make_cpu(model, opts);
  if (dev == "auto") {
    // The first real GPU, if any (a CPU-type Vulkan device such as lavapipe only when named).
    std::string error;
    auto inst = vulkan::Instance::create({}, error);
    if (!inst || inst->default_device() < 0) return make_cpu(model, opts);
    try {
      return make_vulkan(model, opts, "vulkan");
    } catch (const vulkan::VulkanError& e) {
      std::fprintf(stderr, "warning: the GPU cannot run this model (%s); running on the CPU\n", e.what());
      return make_cpu(model, opts);
    }
  }
  if (dev == "vulkan" || dev.rfind("vulkan:", 0) == 0) {
    try {
      return make_vulkan(model, opts, dev);
    } catch (const vulkan::VulkanError& e) {
      throw model::ModelError(fmt::format("--device {}: {}", opts.device, e.what()));
    }
  }
  throw model::ModelError(fmt::format("unknown device \"{}\" (use cpu, vulkan, vulkan:N or auto; `clover devices` lists them)", opts.device));
}

}  // namespace clover::backend
