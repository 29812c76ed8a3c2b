// `clover quantize IN OUT PRESET`: rewrites a GGUF file with its matrices quantised under one of
// llama-quantize's presets (quantize/mixture.h), keeping every other tensor, the tensor order and
// all metadata (general.file_type and general.quantization_version are set as llama-quantize
// sets them). Tensors stream through in chunks of rows, so memory stays at a few tens of MiB
// whatever the model size, and the output appears only when complete (gguf::Writer).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "kernels/dtype.h"

namespace clover::quantize {

struct Options {
  std::string preset;             // "Q4_K_M", ...
  int threads = 0;                // 0: all cores
  bool allow_requantize = false;  // accept Q8_0 input tensors (dequantised, then quantised)
  // Called after every chunk: bytes of tensor data written so far, and in all.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct Summary {
  uint64_t in_bytes = 0, out_bytes = 0;                     // tensor data
  std::map<DType, std::pair<int, uint64_t>> by_type;         // output: tensors and bytes per type
};

// Throws std::invalid_argument / gguf::GgufError with the tensor or key at fault.
Summary quantize_file(const std::string& in, const std::string& out, const Options& opt);

}  // namespace clover::quantize
