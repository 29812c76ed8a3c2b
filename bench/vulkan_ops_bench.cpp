// Costs of the Vulkan device layer on whatever device is there (lavapipe in CI): one submit and
// wait, a dispatch inside a recorded list, the mat-vec of a 4096 x 2048 weight for F16, Q8_0
// and Q4_0, and the GDN delta rule over 256 tokens, token by token vs the chunked scan
// (docs/vulkan.md). Usage: vulkan_ops_bench [device index] [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "backend/vulkan/ops.h"
#include "kernels/convert.h"
#include "timing.h"

using namespace clover;
using namespace clover::vulkan;

namespace {

double now_ms() { return 1e3 * bench::now(); }

// CPU milliseconds of the whole process (lavapipe runs shaders on its threads): steadier than wall
// time on a loaded machine.
double cpu_ms() { return 1e3 * bench::cpu_now(); }

// Median of `reps` runs of the recorded list, in ms.
double time_list(CommandList& cl, int reps) {
  std::vector<double> t;
  cl.run();  // warm
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_ms();
    cl.run();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int index = argc > 1 ? std::atoi(argv[1]) : 0;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  std::string error;
  auto inst = Instance::create({}, error);
  if (!inst) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  Device dev(*inst, index);
  std::printf("device: %s (%s), subgroup %u\n", dev.info().name.c_str(), device_type_name(dev.info().type),
              dev.info().subgroup_size);

  // A list of 1 and of 100 dependent tiny dispatches (argmax over 64 floats).
  Buffer x = dev.create_buffer(64 * 4, MemoryPurpose::Scratch), best = dev.create_buffer(8, MemoryPurpose::Scratch);
  dev.fill_zero(x);
  for (int n : {1, 100}) {
    CommandList cl(dev);
    cl.begin();
    for (int i = 0; i < n; ++i) record_argmax(cl, dev, whole(x), 1, 64, 64, whole(best));
    cl.end();
    std::printf("list of %3d tiny dispatches, submit + wait: %.3f ms\n", n, time_list(cl, reps * 4));
  }

  const int64_t rows = 4096, cols = 2048;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), xv(cols);
  for (float& v : w) v = u(rng);
  for (float& v : xv) v = u(rng);
  Buffer xb = dev.create_buffer(cols * 4, MemoryPurpose::Scratch), yb = dev.create_buffer(rows * 4, MemoryPurpose::Scratch);
  dev.upload(xb, 0, xv.data(), cols * 4);
  Q8Activations q8 = make_q8_activations(dev, 1, cols);
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0}) {
    const size_t rb = dtype_row_bytes(t, cols);
    std::vector<uint8_t> bytes(rb * rows);
    for (int64_t r = 0; r < rows; ++r) kernels::quantize_row(t, w.data() + r * cols, bytes.data() + r * rb, cols);
    const kernels::MatRef ref{t, bytes.data(), rows, cols, rb};
    Buffer wb = dev.create_buffer(device_matrix_bytes(ref), MemoryPurpose::Weights);
    const DeviceMatrix dm = upload_matrix(dev, ref, wb, 0);
    const bool quant = t != DType::F16;
    CommandList cl(dev);
    cl.begin();
    if (quant) record_quantize_q8_0(cl, dev, whole(xb), 1, cols, cols, q8);
    record_matmul(cl, dev, dm, whole(xb), cols, quant ? &q8 : nullptr, 1, whole(yb), rows);
    cl.end();
    const double ms = time_list(cl, reps);
    std::printf("mat-vec %s %lld x %lld: %.2f ms (%.2f GB/s of weights)\n", std::string(dtype_name(t)).c_str(),
                static_cast<long long>(rows), static_cast<long long>(cols), ms, rb * rows / ms / 1e6);
  }
  // The delta rule over 256 tokens at the full head dim (128), 8 value heads over 4 key heads (a
  // quarter of a full-size layer): gdn_step.comp vs gdn_scan.comp.
  {
    const int64_t d = 128, Hk = 4, Hv = 8, T = 256, cs = 2 * Hk * d + Hv * d;
    std::vector<float> conv(static_cast<size_t>(T * cs)), gates(static_cast<size_t>(T * Hv)), prm(2 * Hv, 0.5f);
    for (float& v : conv) v = u(rng) * 0.09f;  // rows of norm ~1, as the L2-normalised q, k
    for (float& v : gates) v = u(rng);
    for (int64_t h = 0; h < Hv; ++h) prm[Hv + h] = -1.0f;
    Buffer cb = dev.create_buffer(conv.size() * 4, MemoryPurpose::Scratch), gb = dev.create_buffer(gates.size() * 4, MemoryPurpose::Scratch);
    Buffer pb = dev.create_buffer(prm.size() * 4, MemoryPurpose::Scratch), sb = dev.create_buffer(Hv * d * d * 4, MemoryPurpose::Scratch);
    Buffer ob = dev.create_buffer(T * Hv * d * 4, MemoryPurpose::Scratch);
    dev.upload(cb, 0, conv.data(), conv.size() * 4);
    dev.upload(gb, 0, gates.data(), gates.size() * 4);
    dev.upload(pb, 0, prm.data(), prm.size() * 4);
    dev.fill_zero(sb);
    const GdnShape shape{d, Hk, Hv, T, cs, Hv, Hv * d};
    double step_ms = 0;  // CPU time
    for (bool scan : {false, true}) {
      CommandList cl(dev);
      cl.begin();
      if (scan)
        record_gdn_scan(cl, dev, shape, 0.088f, whole(cb), whole(gb), whole(gb), whole(pb), whole(sb), whole(ob));
      else
        record_gdn_step(cl, dev, shape, 0.088f, whole(cb), whole(gb), whole(gb), whole(pb), whole(sb), whole(ob));
      cl.end();
      const double c0 = cpu_ms();
      const double ms = time_list(cl, reps);
      const double cpu = (cpu_ms() - c0) / (reps + 1);  // the warm-up run included
      if (!scan) step_ms = cpu;
      std::printf("gdn %s, d %lld, %lld value heads, %lld tokens: %.2f ms wall, %.2f ms CPU%s\n",
                  scan ? "scan (chunks of 64)" : "step (token by token)", static_cast<long long>(d),
                  static_cast<long long>(Hv), static_cast<long long>(T), ms, cpu,
                  scan ? fmt::format(" (CPU time {:.2f}x the step's)", step_ms / cpu).c_str() : "");
    }
  }
  std::printf("device memory booked: %.1f MiB in %llu allocations\n", dev.memory().total() / 1048576.0,
              static_cast<unsigned long long>(dev.memory().allocations()));
  return 0;
}
