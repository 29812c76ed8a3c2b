// The split point of a hybrid pass: a layer with routed experts in host RAM (all of them, or some:
// per-expert placement).
//
//   device:  router -> top-k ids and weights -> groups;  shared expert;  the experts the device
//            holds over their routed rows  (recorded before the split)
//   host:    (a host step after the recorded segment) read back h [N][E] and the groups; the CPU expert runner
//            computes down_e(silu(gate_e h) * up_e h) for every row routed to an expert in RAM
//            (backend/cpu/experts.h)
//   device:  those rows go up into the buffer the device's experts write (rows are grouped by
//            expert, so the rows of consecutive experts in RAM are one range: one upload each),
//            and the pass records on from the combine (routed sum + gated shared expert), as for a
//            layer whose experts are on the device.
// The routing is the device's, so the rows and weights are the ones an all-device pass uses; only
// the expert products differ (the CPU's kernels), within the Vulkan-vs-CPU bounds.
#include <fmt/format.h>

#include <cstring>

#include "backend/vulkan/executor/vulkan_executor.h"
#include "backend/vulkan/moe_ops.h"

namespace clover::vulkan {

void VulkanExecutor::run_host_experts(int il, int N, const Buffer& h, int64_t h_stride, const Buffer& groups, const Buffer& d) {
  // The pass splits here (recorded_pass.h): the host step runs after the segment recorded so far
  // each time the recording is submitted. What it captures is the same for every submission: the
  // layer and the token count are part of the recording's key, the buffers are the executor's
  // scratch.
  split_pass([this, il, N, &h, h_stride, &groups, &d] {
    HostExperts& hx = *host_experts_;
    const int64_t E = hp_.n_embd, k = hp_.n_expert_used;
    hx.rows_in.resize(static_cast<size_t>(N) * h_stride);
    dev_->download(h, 0, hx.rows_in.data(), hx.rows_in.size() * sizeof(float));
    hx.x.resize(static_cast<size_t>(N) * E);
    for (int t = 0; t < N; ++t)
      std::memcpy(&hx.x[static_cast<size_t>(t) * E], &hx.rows_in[static_cast<size_t>(t) * h_stride], E * sizeof(float));
    hx.groups.resize(static_cast<size_t>(moe_group_ints(hp_.n_expert, N, k)));
    dev_->download(groups, 0, hx.groups.data(), hx.groups.size() * sizeof(int32_t));
    const std::vector<bool>& on_host = w_.layers[il].expert_on_host;
    hx.run(il, hx.x.data(), N, hx.groups.data(), on_host);
    // Ranges of routed rows [first[e], first[e] + count[e]) of consecutive experts in RAM (an
    // expert no row goes to does not break a range).
    const int NE = hp_.n_expert;
    const int32_t* count = hx.groups.data();
    const int32_t* first = count + NE;
    for (int e = 0; e < NE;) {
      if (!on_host[e] || count[e] == 0) {
        ++e;
        continue;
      }
      const int64_t r0 = first[e];
      int64_t r1 = r0;
      for (; e < NE && (on_host[e] || count[e] == 0); ++e) r1 = first[e] + count[e];
      dev_->upload(d, static_cast<uint64_t>(r0) * E * sizeof(float), hx.down_rows() + r0 * E,
                   static_cast<uint64_t>(r1 - r0) * E * sizeof(float));
    }
  });
}

}  // namespace clover::vulkan
