#include "model/weight_checks.h"

#include <cstddef>
#include <cstring>
#include <fmt/format.h>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/dtype.h"
#include "model/hparams.h"

namespace clover::model {

namespace {

bool f32_bad(uint32_t u) { return (u & 0x7F800000u) == 0x7F800000u; }
bool f16_bad(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }
bool bf16_bad(uint16_t b) { return (b & 0x7F80u) == 0x7F80u; }

uint16_t load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Byte offsets of the fp16 scales inside one block of a quantised type (ggml's layouts,
// kernels/dtype.h); empty for types without any (none here).
std::vector<size_t> scale_offsets(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS: return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q6_K: return {offsetof(BlockQ6_K, d)};
    default: return {};
  }
}

void refuse(const gguf::TensorInfo& t, const std::string& where) {
  throw ModelError(fmt::format("tensor '{}' holds a non-finite value ({}): the file is damaged", t.name, where));
}

void check_tensor(const gguf::TensorInfo& t) {
  const uint8_t* p = t.data;
  switch (t.type) {
    case DType::F32:
      for (uint64_t i = 0; i < t.size / 4; ++i) {
        uint32_t u;
        std::memcpy(&u, p + 4 * i, 4);
        if (f32_bad(u)) refuse(t, fmt::format("element {}", i));
      }
      return;
    case DType::F16:
      for (uint64_t i = 0; i < t.size / 2; ++i)
        if (f16_bad(load16(p + 2 * i))) refuse(t, fmt::format("element {}", i));
      return;
    case DType::BF16:
      for (uint64_t i = 0; i < t.size / 2; ++i)
        if (bf16_bad(load16(p + 2 * i))) refuse(t, fmt::format("element {}", i));
      return;
    default: break;
  }
  const std::vector<size_t> offs = scale_offsets(t.type);
  const size_t bytes = dtype_block_bytes(t.type);
  if (offs.empty() || bytes == 0) return;
  const uint64_t n_blocks = t.size / bytes;
  for (uint64_t b = 0; b < n_blocks; ++b)
    for (size_t o : offs)
      if (f16_bad(load16(p + b * bytes + o))) refuse(t, fmt::format("the scale of block {}", b));
}

}  // namespace

void check_finite_weights(const gguf::Reader& r) {
  const bool experts_too = r.file_size() <= kFullCheckFileBytes;
  for (const gguf::TensorInfo& t : r.tensors()) {
    if (!experts_too && t.name.find("_exps.") != std::string::npos) continue;
    check_tensor(t);
  }
}

}  // namespace clover::model
