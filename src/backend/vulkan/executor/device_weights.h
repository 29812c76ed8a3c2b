// The model's weights on a Vulkan device: every matrix the forward pass reads (BF16 widened to
// F32, the rest copied as stored), the norms and small per-layer vectors as F32, each tensor in a
// buffer of its own booked as Weights in the device's memory account. The token embedding stays
// in host memory (a pass looks up only its own tokens' rows and uploads them).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/vulkan/moe_ops.h"
#include "backend/vulkan/ops.h"
#include "model/model.h"

namespace clover::vulkan {

struct DeviceLayer {
  bool recurrent = false;
  const Buffer* attn_norm = nullptr;
  const Buffer* post_norm = nullptr;
  // Gated attention.
  DeviceMatrix q, k, v, o;
  const Buffer* q_norm = nullptr;
  const Buffer* k_norm = nullptr;
  // Gated DeltaNet.
  DeviceMatrix qkv, gate, beta, alpha, out;
  const Buffer* conv1d = nullptr;  // [channel][K]
  const Buffer* params = nullptr;  // dt_bias [Hv], then a [Hv]
  const Buffer* norm = nullptr;    // [d]
  // The reverse in-block path of denoising passes (official files only: ssm_rev_*).
  DeviceMatrix rev_beta, rev_alpha;
  const Buffer* rev_params = nullptr;  // rev dt_bias [Hv], then rev a [Hv]
  // MoE. The routed experts expert_on_host marks are not uploaded (the CPU computes them); the
  // rest are (gate_exps, up_exps and down_exps hold only those).
  std::vector<bool> expert_on_host;  // [n_expert], or empty: every expert on the device
  int n_host_experts = 0;
  bool experts_on_device = true;     // some expert of the layer is
  DeviceMatrix router, shared_gate_inp, shared_gate, shared_up, shared_down;
  DeviceExperts gate_exps, up_exps, down_exps;
};

struct DeviceWeights {
  std::vector<std::unique_ptr<Buffer>> buffers;  // owns every buffer the views above point into
  std::vector<DeviceLayer> layers;
  const Buffer* output_norm = nullptr;
  DeviceMatrix output;
  uint64_t bytes = 0;  // allocated for weights
  // Routed experts of all layers kept in host RAM, of all, and the device bytes those in RAM would
  // take (not uploaded).
  int n_host_experts = 0, n_experts = 0;
  uint64_t host_expert_bytes = 0;
};

// Whether the backend has matmul shaders for matrices of this type (device_supported_list()).
bool device_supports(DType t);
// The types device_supports accepts, for messages.
std::string_view device_supported_list();

// [layer][expert]: the routed expert stays in host RAM (backend::Placement::expert_on_host); empty:
// every expert on the device.
using ExpertsOnHost = std::vector<std::vector<bool>>;

// Uploads the weights but the routed experts experts_on_host marks and every weight of the layers
// before first_layer (the CPU's part of a layer split: their DeviceLayer stays empty);
// progress(done, total) in bytes after each tensor. Throws VulkanError naming the first tensor
// whose type has no shader.
DeviceWeights upload_weights(Device& dev, const model::Model& model, const ExpertsOnHost& experts_on_host = {},
                             int first_layer = 0, const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace clover::vulkan
