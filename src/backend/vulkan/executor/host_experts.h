// Routed experts kept in host RAM (backend/placement.h) and computed by the CPU backend's expert
// runner while the GPU runs the rest of the layer (hybrid_moe.cpp). The weights are the mmapped
// model's: nothing is copied.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/experts.h"
#include "backend/vulkan/commands.h"
#include "backend/vulkan/device.h"
#include "model/model.h"
#include "runtime/thread_pool.h"

namespace clover::vulkan {

class HostExperts {
 public:
  // max_tokens: the largest pass; n_threads: 0 for every core.
  HostExperts(const model::Model& model, int max_tokens, int n_threads);

  // For layer il, the routed rows of a pass as the device grouped them (moe_group_ints layout:
  // count [NE] | first [NE] | token [N k] | row_of [N k]) over the input rows x [N][n_embd], the
  // experts on_host marks: afterwards down_rows() holds row r = first[e] + i of such an expert
  // e's output, [N k][n_embd] (the other experts' rows are not written).
  void run(int il, const float* x, int N, const int32_t* groups, const std::vector<bool>& on_host);
  const float* down_rows() const { return runner_.out(0); }
  int n_threads() const { return pool_.size(); }

  // Host copies of the device rows the runner reads, and the pass's split of the experts in RAM
  // into those the CPU computes and those streamed to the device (hybrid_moe.cpp).
  std::vector<float> rows_in, x;
  std::vector<int32_t> groups;
  std::vector<bool> cpu;
  std::vector<int> streamed;

 private:
  const model::Model& model_;
  ThreadPool pool_;
  backend::cpu::CpuExpertRunner runner_;
  std::vector<backend::cpu::ExpertWork> works_;
};

// Staging on the device for experts in RAM streamed there (--stream-experts): the gate, up and
// down matrices of up to backend::kStreamedExperts experts of one layer, and the command list
// that computes them (hybrid_moe.cpp).
struct ExpertStream {
  Buffer gate, up, down;
  std::unique_ptr<CommandList> list;
  uint64_t streamed = 0;  // experts streamed so far (a statistic for tests and logs)
};

}  // namespace clover::vulkan
