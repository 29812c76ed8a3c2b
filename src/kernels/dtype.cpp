// Sizes and names of the weight element types (ggml numbering).
#include "kernels/dtype.h"

#include <algorithm>
#include <array>
#include <string>

namespace clover {

namespace {
struct TypeInfo {
  DType type;
  std::string_view name;
  int64_t block_values;
  size_t block_bytes;
  bool weight;  // loadable from a file
};
constexpr std::array<TypeInfo, 17> kTypes = {{
    {DType::F32, "F32", 1, 4, true},
    {DType::F16, "F16", 1, 2, true},
    {DType::BF16, "BF16", 1, 2, true},
    {DType::Q8_0, "Q8_0", kQK, sizeof(BlockQ8_0), true},
    {DType::Q4_0, "Q4_0", kQK, sizeof(BlockQ4_0), true},
    {DType::Q2_K, "Q2_K", kQK_K, sizeof(BlockQ2_K), true},
    {DType::Q3_K, "Q3_K", kQK_K, sizeof(BlockQ3_K), true},
    {DType::Q4_K, "Q4_K", kQK_K, sizeof(BlockQ4_K), true},
    {DType::Q5_K, "Q5_K", kQK_K, sizeof(BlockQ5_K), true},
    {DType::Q6_K, "Q6_K", kQK_K, sizeof(BlockQ6_K), true},
    {DType::Q4_1, "Q4_1", kQK, sizeof(BlockQ4_1), true},
    {DType::Q5_0, "Q5_0", kQK, sizeof(BlockQ5_0), true},
    {DType::Q5_1, "Q5_1", kQK, sizeof(BlockQ5_1), true},
    {DType::IQ4_NL, "IQ4_NL", kQK, sizeof(BlockIQ4_NL), true},
    {DType::IQ4_XS, "IQ4_XS", kQK_K, sizeof(BlockIQ4_XS), true},
    {DType::Q8_K, "Q8_K", kQK_K, sizeof(BlockQ8_K), false},
    {DType::Q8_1, "Q8_1", kQK, sizeof(BlockQ8_1), false},
}};

const TypeInfo* info(DType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return &i;
  return nullptr;
}
}  // namespace

int64_t dtype_block_size(DType t) {
  const TypeInfo* i = info(t);
  return i ? i->block_values : 1;
}

size_t dtype_block_bytes(DType t) {
  const TypeInfo* i = info(t);
  return i ? i->block_bytes : 0;
}

size_t dtype_row_bytes(DType t, int64_t n) {
  return static_cast<size_t>(n / dtype_block_size(t)) * dtype_block_bytes(t);
}

std::string_view dtype_name(DType t) {
  const TypeInfo* i = info(t);
  return i ? i->name : "?";
}

// Case-insensitive: ggml prints "q4_0", llama.cpp's file types say "Q4_0".
std::optional<DType> dtype_from_name(std::string_view name) {
  auto upper = [](char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; };
  for (const auto& i : kTypes) {
    const std::string_view n = i.name;
    const auto same = [&](char a, char b) { return a == upper(b); };
    if (i.weight && n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), same)) return i.type;
  }
  return std::nullopt;
}

bool dtype_supported(uint32_t ggml_type) {
  const TypeInfo* i = info(static_cast<DType>(ggml_type));
  return i && i->weight;
}

std::string_view dtype_supported_list() {
  static const std::string list = [] {
    std::string s;
    for (const auto& i : kTypes)
      if (i.weight) s += (s.empty() ? "" : ", ") + std::string(i.name);
    return s;
  }();
  return list;
}

bool dtype_is_kquant(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ||
         t == DType::IQ4_XS;
}

bool dtype_is_legacy_extra(DType t) { return t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::IQ4_NL;
}

}  // namespace clover
