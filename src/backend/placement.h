// Where a GPU backend keeps each weight: on the device or in host RAM (the mmapped file), from the
// model's tensor table and a device budget. A plain function of its inputs (nothing is allocated),
// so the memory ladder of a 20 GB model can be printed and tested without the file.
//
// Order of claims on the device, as llama.cpp's --n-cpu-moe users size it:
//   1. the dense part of every layer (attention / GDN, norms, router, shared expert), the output
//      head, the KV cache and recurrent state of the sequences, the compute buffers;
//   2. then the routed experts, whole layers at a time, last layers first: the experts of the
//      first N layers stay in RAM (--n-cpu-moe N), computed there by the CPU expert runner;
//      under a budget the boundary layer is split: its experts 0..n-1 on the device, as many as
//      still fit, the rest in RAM (so the budget is used to within one expert).
// With --stream-experts N the device also holds staging for experts in RAM streamed to it for
// passes with N or more rows routed to them (Placement::stream).
// The token embedding always stays in host memory (a pass uploads only its tokens' rows), unless
// the head reuses it (no output.weight): then it is on the device as the head.
//
// With -ngl N below the layer count the first n_layer - N layers run wholly on the CPU
// (backend/layer_split.h): none of their weights, KV cache or recurrent state is on the device,
// and the claims above are made for the device's layers only.
//
// The unit is one expert of one layer, its gate, up and down matrices together (the CPU computes
// the whole expert FFN for the rows routed to it). An override naming one of a layer's expert
// tensors moves all of the layer's experts; one naming the virtual name of one expert of a tensor,
// blk.N.ffn_up_exps.E (the tensor name without ".weight", then the expert number), moves that
// expert (docs/placement.md).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "model/hparams.h"

namespace clover::backend {

// One row of the tensor table: what the planner needs of a tensor.
struct TensorSize {
  std::string name;
  DType type = DType::F32;
  uint64_t bytes = 0;  // as stored in the file
};
// The table of a loaded model (its GGUF tensor list).
std::vector<TensorSize> tensor_table(const model::Model& model);

enum class Place { Device, Host };

// -ot / --override-tensor REGEX=cpu|vulkan (llama.cpp's names: CPU, Vulkan0, ... are accepted too).
struct TensorOverride {
  std::string pattern;  // ECMAScript regex, searched in the tensor name (as llama.cpp does) and in
                        // the experts' virtual names blk.N.ffn_up_exps.E
  Place place = Place::Host;
};
// "REGEX=cpu" -> override; throws ModelError naming what is wrong (no '=', a bad regex, an
// unknown place).
TensorOverride parse_tensor_override(const std::string& spec);

struct PlacementRequest {
  uint64_t budget = 0;     // --vram-budget in bytes; 0: no budget (place what the flags say)
  bool cpu_moe = false;    // --cpu-moe: every layer's experts in RAM
  int n_cpu_moe = 0;       // --n-cpu-moe N: experts of layers [0, N) in RAM
  int cpu_layers = 0;      // layers [0, cpu_layers) run wholly on the CPU (-ngl n_layer - cpu_layers)
  std::vector<TensorOverride> overrides;  // applied after the two above, in order (the last match wins)
  // What the device holds besides weights.
  int64_t n_ctx = 4096;    // positions of each sequence's KV cache
  KvTypes kv;
  int n_seq = 1;           // sequences (server slots)
  int max_batch = 256;     // tokens of the largest pass
  int stream_experts = 0;  // > 0: experts in RAM may be streamed to the device (its staging buffers)
};

// The compute buffers the Vulkan executor allocates for passes of max_batch tokens (an upper
// bound: row strides rounded to 256 bytes, the head as if every row were asked for at once).
uint64_t vulkan_compute_bytes(const model::HParams& hp, std::span<const TensorSize> table, int max_batch);
// What one tensor takes on the Vulkan device (BF16 is widened to F32 there).
uint64_t device_bytes_of(const TensorSize& t);

struct Placement {
  int cpu_layers = 0;  // layers [0, cpu_layers) run on the CPU (nothing of them on the device)
  // [layer][expert]: the routed expert stays in RAM (its gate, up and down), computed by the CPU.
  // All false for the CPU's layers (they are not the device's to place).
  std::vector<std::vector<bool>> expert_on_host;
  // Device bytes.
  uint64_t dense_weights = 0;   // everything but the routed experts (and the host-side embedding)
  uint64_t expert_weights = 0;  // the routed experts on the device
  uint64_t kv = 0;              // KV caches of n_seq sequences of n_ctx positions
  uint64_t recurrent = 0;       // GDN state of n_seq sequences
  uint64_t compute = 0;         // compute buffers
  uint64_t stream = 0;          // staging for experts in RAM streamed to the device (--stream-experts)
  // Host RAM the weights in RAM take (read from the mmapped file) and the CPU expert runner's scratch.
  uint64_t host_weights = 0;    // routed experts in RAM + the token embedding + every weight of the CPU's layers
  uint64_t host_caches = 0;     // KV caches and recurrent state of the CPU's layers
  uint64_t host_compute = 0;
  uint64_t expert_bytes_per_layer = 0;  // the largest layer's routed experts
  uint64_t expert_bytes = 0;            // one expert (gate, up and down) of that layer

  uint64_t device_total() const { return dense_weights + expert_weights + kv + recurrent + compute + stream; }
  uint64_t host_total() const { return host_weights + host_caches + host_compute; }
  int n_host_experts(int il) const;  // of layer il
  int n_host_layers() const;         // layers whose experts are all in RAM
  int n_split_layers() const;        // layers with experts both on the device and in RAM
  bool any_on_host() const;
  // "experts of layers 0-9 in RAM, and 156 of layer 10's 256 (experts 100-255) (10 of 40 layers
  // whole, 2716 of 10240 experts); device 15.1 GiB: weights 12.3 (dense 1.4, experts 10.9), KV
  // 0.3, state 0.1, compute 0.6; RAM 4.2 GiB", after "layers 0-3 on the CPU; " with a layer split.
  std::string describe() const;
};

// Throws ModelError when the request cannot be met: a budget below what the device needs with
// every expert in RAM (the message names the budget that would fit and the longest context that
// fits this budget), flags that contradict each other, an override that matches no tensor or
// expert of this model.
Placement plan_placement(const model::HParams& hp, std::span<const TensorSize> table, const PlacementRequest& req);

// "24G", "16384M", "8GiB", "1.5G", "123456" (bytes) -> bytes; throws ModelError otherwise.
uint64_t parse_size(const std::string& s);
std::string format_gib(uint64_t bytes);  // "15.09 GiB"

}  // namespace clover::backend
