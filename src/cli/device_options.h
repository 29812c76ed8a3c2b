// Where the model runs, spelled as llama.cpp spells it, shared by every command that loads a
// model (`run`, `logits`, `bench`, `serve`). -dev, -ngl and -fa are rewritten to the long names
// in main.cpp (CLI11 cannot declare one-dash names of several letters).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "clover/clover.h"

namespace clover::cli {

struct DeviceArgs {
  std::string device = "auto";
  int n_gpu_layers = -1;
  std::string flash_attn = "auto";
};

inline void add_device_options(CLI::App* c, DeviceArgs& d) {
  c->add_option("--device", d.device,
                "where the model runs (-dev): auto (the first GPU if there is one, else the CPU), cpu, vulkan, vulkan:N "
                "(`clover devices` lists them; a CPU-type Vulkan device such as lavapipe only when named)")
      ->capture_default_str();
  c->add_option("--n-gpu-layers,--gpu-layers", d.n_gpu_layers,
                "layers on the GPU (-ngl): 0 runs on the CPU, 99 (or any count >= the model's layers) puts all on the GPU; "
                "a split between the two is not implemented yet and is refused")
      ->check(CLI::Range(-1, 1000000));
  c->add_option("--flash-attn", d.flash_attn,
                "-fa on|off|auto: accepted for llama.cpp command lines; attention always runs as one fused pass over the "
                "keys (online softmax) on every backend")
      ->check(CLI::IsMember({"on", "off", "auto"}, CLI::ignore_case))
      ->capture_default_str();
}

inline void apply_device_options(const DeviceArgs& d, EngineOptions& eo) {
  eo.device = d.device;
  eo.n_gpu_layers = d.n_gpu_layers;
  if (d.flash_attn == "off" || d.flash_attn == "OFF")
    std::fprintf(stderr, "note: -fa off has no effect: attention always runs as one fused pass over the keys\n");
}

}  // namespace clover::cli
