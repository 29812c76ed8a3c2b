// The split point of a hybrid pass: a layer with routed experts in host RAM (all of them, or some:
// per-expert placement).
//
//   device:  router -> top-k ids and weights -> groups  (a segment of its own)
//   host:    read back h [N][E] and the groups, then, while the device runs the shared expert and
//            the experts it holds over their routed rows (the next segment), the CPU expert
//            runner computes down_e(silu(gate_e h) * up_e h) for every row routed to an expert in
//            RAM (backend/cpu/experts.h)
//            (--stream-experts N: an expert in RAM with N or more rows is uploaded to staging and
//            computed by the device instead, stream_experts())
//   device:  those rows go up into the buffer the device's experts write (rows are grouped by
//            expert, so the rows of consecutive experts in RAM are one range: one upload each),
//            and the pass records on from the combine (routed sum + gated shared expert), as for a
//            layer whose experts are on the device.
// The routing is the device's, so the rows and weights are the ones an all-device pass uses; only
// the expert products differ (the CPU's kernels), within the Vulkan-vs-CPU bounds.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "backend/vulkan/executor/vulkan_executor.h"
#include "backend/vulkan/moe_ops.h"

namespace clover::vulkan {

namespace {
// The activation kinds products with these weights read (VulkanExecutor::quantize's `needed`).
unsigned need(DType t) { return reads_q8_activations(t) ? 1u << static_cast<int>(activation_kind(t)) : 0u; }
}  // namespace

uint64_t VulkanExecutor::stream_experts(int il, int N, const std::vector<int>& experts, const MoeRows& r) {
  ExpertStream& st = *stream_;
  const model::MoeWeights& M = model_.weights().layers[il].moe;
  const int NE = hp_.n_expert;
  const int64_t E = hp_.n_embd, k = hp_.n_expert_used, ff = hp_.n_ff_exp;
  std::vector<bool> skip(static_cast<size_t>(NE), true);
  for (int e : experts) skip[e] = false;
  // The batch's matrices back to back in the staging buffers, in runs of consecutive experts.
  auto up = [&](const model::ExpertsRef& ref, const Buffer& buf) {
    std::vector<kernels::MatRef> mats;
    for (int e = 0; e < NE; ++e) mats.push_back(ref.expert(e));
    return upload_experts(*dev_, mats.data(), NE, buf, 0, skip);
  };
  const DeviceExperts gate = up(M.gate, st.gate), upe = up(M.up, st.up), down = up(M.down, st.down);
  // Their products as the device computes its own experts' (record_moe): gate and up over the
  // routed rows' tokens, swiglu, down over the routed rows. Rows of other experts are written by
  // swiglu only, after their last use.
  CommandList& cl = *st.list;
  cl.begin();
  CommandList* const recording = rec_;
  rec_ = &cl;
  const QuantActs q8 = quantize(need(gate.type) | need(upe.type), whole(*r.h), N, E, r.sE);
  record_matmul_experts(cl, *dev_, gate, whole(*r.h), r.sE, q8.for_type(gate.type), whole(*r.groups), N * k, true, whole(*r.g), r.sFF);
  record_matmul_experts(cl, *dev_, upe, whole(*r.h), r.sE, q8.for_type(upe.type), whole(*r.groups), N * k, true, whole(*r.u),
                        r.sFF);
  const QuantActs q8g = swiglu_quantize(need(down.type), whole(*r.g), whole(*r.u), N * k, ff, r.sFF);
  record_matmul_experts(cl, *dev_, down, whole(*r.g), r.sFF, q8g.for_type(down.type), whole(*r.groups), N * k, false, whole(*r.d),
                        E);
  rec_ = recording;
  cl.end();
  st.streamed += experts.size();
  return cl.submit();
}

void VulkanExecutor::run_host_experts(int il, int N, const MoeRows& r, const std::function<void()>& record_device_part) {
  // The pass splits twice here (recorded_pass.h). What the steps capture is the same for every
  // submission: the layer and the token count are part of the recording's key, the buffers are
  // the executor's scratch, the host copies HostExperts'.
  //   1. After the routing (host_step): read the groups and the input rows; choose the experts
  //      to stream.
  //   2. Beside the next segment, the device's part of the layer (beside_next): stream, compute
  //      on the CPU, upload the down rows into d, whose rows of the device's experts that segment
  //      writes (disjoint rows; uploads and streamed lists are ordered after it by its closing
  //      barrier).
  //   3. The combine, after both: a split with no host work.
  split_pass(
      [this, il, N, r] {
        HostExperts& hx = *host_experts_;
        const int64_t E = hp_.n_embd, k = hp_.n_expert_used;
        const int NE = hp_.n_expert;
        hx.groups.resize(static_cast<size_t>(moe_group_ints(NE, N, k)));
        dev_->download(*r.groups, 0, hx.groups.data(), hx.groups.size() * sizeof(int32_t));
        const int32_t* count = hx.groups.data();
        // Experts in RAM with stream_rows_ or more rows are streamed to the device.
        const std::vector<bool>& on_host = w_.layers[il].expert_on_host;
        hx.cpu = on_host;
        hx.streamed.clear();
        for (int e = 0; e < NE && stream_rows_ > 0; ++e)
          if (on_host[e] && count[e] >= stream_rows_) hx.streamed.push_back(e), hx.cpu[e] = false;
        hx.rows_in.resize(static_cast<size_t>(N) * r.sE);
        dev_->download(*r.h, 0, hx.rows_in.data(), hx.rows_in.size() * sizeof(float));
        hx.x.resize(static_cast<size_t>(N) * E);
        for (int t = 0; t < N; ++t)
          std::memcpy(&hx.x[static_cast<size_t>(t) * E], &hx.rows_in[static_cast<size_t>(t) * r.sE], E * sizeof(float));
      },
      [this, il, N, r] {
        HostExperts& hx = *host_experts_;
        const int64_t E = hp_.n_embd;
        const int NE = hp_.n_expert;
        const int32_t* count = hx.groups.data();
        const int32_t* first = count + NE;
        // Streamed experts a staging buffer's worth at a time; the last batch runs while the CPU
        // computes the others.
        uint64_t pending = 0;
        for (size_t b0 = 0; b0 < hx.streamed.size(); b0 += backend::kStreamedExperts) {
          if (pending) dev_->wait(pending);
          const auto b1 = hx.streamed.begin() +
                          static_cast<std::ptrdiff_t>(std::min(hx.streamed.size(), b0 + backend::kStreamedExperts));
          pending = stream_experts(il, N, std::vector<int>(hx.streamed.begin() + static_cast<std::ptrdiff_t>(b0), b1), r);
        }
        hx.run(il, hx.x.data(), N, hx.groups.data(), hx.cpu);
        if (pending) dev_->wait(pending);
        // Ranges of routed rows [first[e], first[e] + count[e]) of consecutive experts the CPU
        // computed (an expert no row goes to does not break a range).
        for (int e = 0; e < NE;) {
          if (!hx.cpu[e] || count[e] == 0) {
            ++e;
            continue;
          }
          const int64_t r0 = first[e];
          int64_t r1 = r0;
          for (; e < NE && (hx.cpu[e] || count[e] == 0); ++e) r1 = first[e] + count[e];
          dev_->upload(*r.d, static_cast<uint64_t>(r0) * E * sizeof(float), hx.down_rows() + r0 * E,
                       static_cast<uint64_t>(r1 - r0) * E * sizeof(float));
        }
      });
  record_device_part();
  split_pass(nullptr);
}

}  // namespace clover::vulkan
