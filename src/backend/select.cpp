// The backend factory: which executor runs the model, from the options.
#include <fmt/format.h>

#include "backend/cpu/cpu_executor.h"
#include "backend/executor.h"

namespace clover::backend {

std::unique_ptr<Executor> make_executor(const model::Model& model, const ExecutorOptions& opts) {
  if (opts.device.empty() || opts.device == "cpu") {
    cpu::CpuExecutor::Options o;
    o.n_threads = opts.n_threads;
    o.max_batch = opts.max_batch;
    o.prefault = opts.prefault;
    return std::make_unique<cpu::CpuExecutor>(model, o);
  }
  throw model::ModelError(fmt::format("unknown device \"{}\" (this build has: cpu)", opts.device));
}

}  // namespace clover::backend
