// Sizes and names of the weight element types (ggml numbering).
#include "kernels/dtype.h"

#include <algorithm>

namespace clover {

int64_t dtype_block_size(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q8_0:
      return kQK;
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return 1;
  }
  return 1;
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::Q4_0: return sizeof(BlockQ4_0);
    case DType::Q8_0: return sizeof(BlockQ8_0);
  }
  return 0;
}

size_t dtype_row_bytes(DType t, int64_t n) {
  return static_cast<size_t>(n / dtype_block_size(t)) * dtype_block_bytes(t);
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q4_0: return "Q4_0";
    case DType::Q8_0: return "Q8_0";
  }
  return "?";
}

// Case-insensitive: ggml prints "q4_0", llama.cpp's file types say "Q4_0".
std::optional<DType> dtype_from_name(std::string_view name) {
  auto upper = [](char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; };
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0}) {
    const std::string_view n = dtype_name(t);
    const auto same = [&](char a, char b) { return a == upper(b); };
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), same)) return t;
  }
  return std::nullopt;
}

bool dtype_supported(uint32_t ggml_type) {
  switch (ggml_type) {
    case static_cast<uint32_t>(DType::F32):
    case static_cast<uint32_t>(DType::F16):
    case static_cast<uint32_t>(DType::BF16):
    case static_cast<uint32_t>(DType::Q4_0):
    case static_cast<uint32_t>(DType::Q8_0):
      return true;
    default:
      return false;
  }
}

}  // namespace clover
