// The backend factory: which executor runs the model, from the options.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "backend/cpu/cpu_executor.h"
#include "backend/executor.h"
#include "backend/layer_split.h"
#include "backend/placement.h"
#include "backend/vulkan/executor/vulkan_executor.h"
#include "kernels/cpu_features.h"
#include "runtime/thread_pool.h"

namespace clover::backend {

namespace {

bool placement_flags(const ExecutorOptions& o) {
  return o.cpu_moe || o.n_cpu_moe > 0 || !o.override_tensor.empty() || o.vram_budget > 0 || o.stream_experts > 0;
}

// The weights in private memory (--no-mmap) rewritten for the CPU's Q4_0 / Q4_K / IQ4_XS / Q5_K
// kernels: in place, once, before any executor reads them (the engine's model has no other
// reader). A mapped file is left as it is, and so are the layouts the CPU has no kernel for (an
// AVX2 CPU reads Q4_0x16 only; the other paths would unpack each tile: slower than the file's
// layout).
void repack_for_cpu(model::Model& model, const ExecutorOptions& opts) {
  const kernels::Isa isa = kernels::isa_active();
  if (!opts.repack || model.file().mapped() || isa == kernels::Isa::Scalar) return;
  ThreadPool pool(opts.n_threads > 0 ? opts.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const model::RepackReport r = model.repack(pool, opts.on_repack, isa);
  if (r.matrices > 0)
    std::fprintf(stderr, "repacked %d %s tensors (%.2f GiB) in place for the %s kernels in %.2f s (--no-repack: the file's layout)\n",
                 r.matrices, isa == kernels::Isa::Avx512 ? "Q4_0 / Q4_K / IQ4_XS / Q5_K" : "Q4_0", static_cast<double>(r.bytes) / (1u << 30),
                 isa == kernels::Isa::Avx512 ? "AVX-512" : "AVX2", r.seconds);
}

std::unique_ptr<Executor> make_cpu(model::Model& model, const ExecutorOptions& opts) {
  if (placement_flags(opts))
    std::fprintf(stderr, "note: --cpu-moe, --n-cpu-moe, -ot, --vram-budget and --stream-experts do nothing on the CPU "
                         "backend: every weight is in RAM already\n");
  repack_for_cpu(model, opts);
  cpu::CpuExecutor::Options o;
  o.n_threads = opts.n_threads;
  o.max_batch = opts.max_batch;
  return std::make_unique<cpu::CpuExecutor>(model, o);
}

// --stream-experts's default: kStreamExpertsDefaultRows on a GPU, never on a CPU-type device (its
// "device memory" is the host's: nothing to gain by copying the weights).
int stream_rows(const ExecutorOptions& opts, const std::string& device) {
  if (opts.stream_experts >= 0) return opts.stream_experts;
  std::string error;
  auto inst = vulkan::Instance::create({}, error);
  if (!inst) return 0;  // the executor reports the error
  try {
    const int i = inst->resolve(device == "vulkan" ? "" : device);
    return inst->devices()[i].type == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0 : kStreamExpertsDefaultRows;
  } catch (const std::exception&) {
    return 0;
  }
}

// The device's executor of layers [cpu_layers, n_layer) and the head (all of them when cpu_layers is 0).
std::unique_ptr<vulkan::VulkanExecutor> make_vulkan(const model::Model& model, const ExecutorOptions& opts,
                                                    const std::string& device, int cpu_layers) {
  // Which experts stay in RAM: the planner, from the flags and the budget (refuses what cannot fit).
  const int stream = stream_rows(opts, device);
  PlacementRequest req;
  req.cpu_layers = cpu_layers;
  req.stream_experts = stream;
  req.budget = opts.vram_budget;
  req.cpu_moe = opts.cpu_moe;
  req.n_cpu_moe = opts.n_cpu_moe;
  for (const std::string& s : opts.override_tensor) req.overrides.push_back(parse_tensor_override(s));
  req.n_ctx = opts.n_ctx, req.kv = opts.kv, req.n_seq = opts.n_seq, req.max_batch = opts.max_batch;
  const Placement plan = plan_placement(model.hp(), tensor_table(model), req);
  std::fprintf(stderr, "placement: %s\n", plan.describe().c_str());
  vulkan::VulkanExecutor::Options o;
  o.device = device;
  o.max_batch = opts.max_batch;
  if (plan.any_on_host()) o.experts_on_host = plan.expert_on_host;
  o.n_threads = opts.n_threads;
  o.stream_rows = stream;
  o.placement = plan.describe();
  o.first_layer = cpu_layers;
  const char* v = std::getenv("CLOVER_VK_VALIDATE");
  o.validate = v && std::string(v) == "1";
  return std::make_unique<vulkan::VulkanExecutor>(model, o);
}

// -ngl N below the layer count: layers [0, n_layer - N) on the CPU, the rest and the head on the
// device (backend/layer_split.h); the whole model on the device otherwise.
std::unique_ptr<Executor> make_gpu(model::Model& model, const ExecutorOptions& opts, const std::string& device) {
  const int n_layer = model.hp().n_layer;
  const int cpu_layers = opts.n_gpu_layers < 0 || opts.n_gpu_layers >= n_layer ? 0 : n_layer - opts.n_gpu_layers;
  auto back = make_vulkan(model, opts, device, cpu_layers);
  if (cpu_layers == 0) return back;
  cpu::CpuExecutor::Options o;
  o.n_threads = opts.n_threads;
  o.max_batch = opts.max_batch;
  o.n_layers = cpu_layers;
  auto split = std::make_unique<LayerSplitExecutor>(std::make_unique<cpu::CpuExecutor>(model, o), std::move(back));
  std::fprintf(stderr, "-ngl %d: %s\n", opts.n_gpu_layers, split->describe_layers().c_str());
  return split;
}

}  // namespace

std::unique_ptr<Executor> make_executor(model::Model& model, const ExecutorOptions& opts) {
  std::string dev = opts.device.empty() ? "auto" : opts.device;
  std::transform(dev.begin(), dev.end(), dev.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const std::string& s : opts.override_tensor) parse_tensor_override(s);  // refused on every backend when malformed
  if (opts.n_gpu_layers < -1) throw model::ModelError(fmt::format("-ngl {}: give a layer count (0: the CPU, 99: all)", opts.n_gpu_layers));
  if (dev != "cpu" && opts.n_gpu_layers == 0) {
    std::fprintf(stderr, "-ngl 0: every layer runs on the CPU\n");
    dev = "cpu";
  }
  if (dev == "cpu") return make_cpu(model, opts);
  if (dev == "auto") {
    // The first real GPU, if any (a CPU-type Vulkan device such as lavapipe only when named).
    std::string error;
    auto inst = vulkan::Instance::create({}, error);
    if (!inst || inst->default_device() < 0) return make_cpu(model, opts);
    try {
      return make_gpu(model, opts, "vulkan");
    } catch (const vulkan::VulkanError& e) {
      std::fprintf(stderr, "warning: the GPU cannot run this model (%s); running on the CPU\n", e.what());
      return make_cpu(model, opts);
    }
  }
  if (dev == "vulkan" || dev.rfind("vulkan:", 0) == 0) {
    try {
      return make_gpu(model, opts, dev);
    } catch (const vulkan::VulkanError& e) {
      throw model::ModelError(fmt::format("--device {}: {}", opts.device, e.what()));
    }
  }
  throw model::ModelError(fmt::format("unknown device \"{}\" (use cpu, vulkan, vulkan:N or auto; `clover devices` lists them)", opts.device));
}

}  // namespace clover::backend
