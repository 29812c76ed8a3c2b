// Where the model runs, spelled as llama.cpp spells it, shared by every command that loads a
// model (`run`, `logits`, `bench`, `serve`). -dev, -ngl and -fa are rewritten to the long names
// in main.cpp (CLI11 cannot declare one-dash names of several letters).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "clover/clover.h"

namespace clover::cli {

struct DeviceArgs {
  std::string device = "auto";
  int n_gpu_layers = -1;
  std::string flash_attn = "auto";
  bool cpu_moe = false;
  int n_cpu_moe = 0;
  std::vector<std::string> override_tensor;
  std::string vram_budget;
  int stream_experts = -1;
};

inline void add_device_options(CLI::App* c, DeviceArgs& d) {
  c->add_option("--device", d.device,
                "where the model runs (-dev): auto (the first GPU if there is one, else the CPU), cpu, vulkan, vulkan:N "
                "(`clover devices` lists them; a CPU-type Vulkan device such as lavapipe only when named)")
      ->capture_default_str();
  c->add_option("--n-gpu-layers,--gpu-layers", d.n_gpu_layers,
                "layers on the GPU (-ngl): 0 runs on the CPU, 99 (or any count >= the model's layers) puts all on the GPU; "
                "N between puts the last N layers and the output head on the GPU and runs the first ones on the CPU "
                "(their weights, KV cache and state in RAM); --n-cpu-moe/--cpu-moe/-ot/--vram-budget then place the GPU "
                "layers' experts")
      ->check(CLI::Range(-1, 1000000));
  // Experts in system RAM, computed by the CPU beside the GPU (docs/placement.md).
  c->add_flag("--cpu-moe", d.cpu_moe, "keep every layer's routed experts in RAM, computed by the CPU (-cmoe)");
  c->add_option("--n-cpu-moe", d.n_cpu_moe, "keep the routed experts of the first N layers in RAM, computed by the CPU (-ncmoe)")
      ->check(CLI::Range(0, 1000000));
  c->add_option("--override-tensor", d.override_tensor,
                "REGEX=cpu|vulkan,... (-ot): where the tensors whose names match go; routed expert tensors "
                "(blk.N.ffn_*_exps) may stay in RAM (cpu), the last match wins; one expert: blk.N.ffn_up_exps.E "
                "(e.g. 'blk\\.3\\.ffn_up_exps\\.(0|5)$=cpu', docs/placement.md)");
  c->add_option("--vram-budget", d.vram_budget,
                "device memory to use, e.g. 16G: the experts of as many first layers as needed stay in RAM (the last of "
                "them split per expert); refused, naming "
                "what would fit, when the dense part, KV cache and compute buffers alone do not fit");
  c->add_option("--stream-experts", d.stream_experts,
                "N: an expert kept in RAM that N or more rows of a pass (prefill, block passes) are routed to is uploaded "
                "to the GPU and computed there instead of on the CPU; 0: never. Default: 32 on a GPU (llama.cpp's "
                "threshold, not measured for clover.cpp yet), never on a CPU-type device such as lavapipe")
      ->check(CLI::Range(0, 1000000));
  c->add_option("--flash-attn", d.flash_attn,
                "-fa on|off|auto: accepted for llama.cpp command lines; attention always runs as one fused pass over the "
                "keys (online softmax) on every backend")
      ->check(CLI::IsMember({"on", "off", "auto"}, CLI::ignore_case))
      ->capture_default_str();
}

inline void apply_device_options(const DeviceArgs& d, EngineOptions& eo) {
  eo.device = d.device;
  eo.n_gpu_layers = d.n_gpu_layers;
  eo.cpu_moe = d.cpu_moe;
  eo.n_cpu_moe = d.n_cpu_moe;
  eo.stream_experts = d.stream_experts;
  eo.override_tensor.clear();
  for (const std::string& ot : d.override_tensor) {  // llama.cpp allows several items separated by commas
    size_t b = 0;
    for (size_t e; (e = ot.find(',', b)) != std::string::npos; b = e + 1) eo.override_tensor.push_back(ot.substr(b, e - b));
    eo.override_tensor.push_back(ot.substr(b));
  }
  eo.vram_budget = d.vram_budget;
  if (d.flash_attn == "off" || d.flash_attn == "OFF")
    std::fprintf(stderr, "note: -fa off has no effect: attention always runs as one fused pass over the keys\n");
}

}  // namespace clover::cli
