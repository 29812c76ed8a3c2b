// Metadata values, type tables and shape checks shared by the GGUF reader and writer.
#include "gguf/format.h"

#include <array>

namespace clover::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "invalid";
}

Value Value::u32(uint32_t x) { return Value{ValueType::U32, ValueType::U8, uint64_t{x}}; }
Value Value::i32(int32_t x) { return Value{ValueType::I32, ValueType::U8, int64_t{x}}; }
Value Value::u64(uint64_t x) { return Value{ValueType::U64, ValueType::U8, x}; }
Value Value::f32(float x) { return Value{ValueType::F32, ValueType::U8, double{x}}; }
Value Value::boolean(bool x) { return Value{ValueType::Bool, ValueType::U8, x}; }
Value Value::str(std::string s) { return Value{ValueType::String, ValueType::U8, std::move(s)}; }
Value Value::array(ValueType elem, std::vector<Value> items) {
  return Value{ValueType::Array, elem, std::move(items)};
}
Value Value::str_array(const std::vector<std::string>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(str(s));
  return array(ValueType::String, std::move(v));
}
Value Value::i32_array(const std::vector<int32_t>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (int32_t x : items) v.push_back(i32(x));
  return array(ValueType::I32, std::move(v));
}
Value Value::f32_array(const std::vector<float>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (float x : items) v.push_back(f32(x));
  return array(ValueType::F32, std::move(v));
}
Value Value::bool_array(const std::vector<bool>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (bool x : items) v.push_back(boolean(x));
  return array(ValueType::Bool, std::move(v));
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // validated against overflow when the tensor was read or added
  return n;
}

namespace detail {

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: case ValueType::Array: return 0;
  }
  return 0;
}

bool is_valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::F64); }

size_t min_encoded_size(ValueType t) {
  if (t == ValueType::String) return 8;
  if (t == ValueType::Array) return 12;
  return scalar_size(t);
}

std::string ggml_type_label(uint32_t ggml_type) {
  // ggml's numbering (ggml.h `enum ggml_type`); gaps are ids ggml has retired.
  static constexpr std::array<const char*, 40> kNames = {
      "F32", "F16", "Q4_0", "Q4_1", nullptr, nullptr, "Q5_0", "Q5_1", "Q8_0", "Q8_1",
      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
      "BF16", nullptr, nullptr, nullptr, "TQ1_0", "TQ2_0", nullptr, nullptr, nullptr, "MXFP4"};
  const char* name = ggml_type < kNames.size() ? kNames[ggml_type] : nullptr;
  return std::string(name ? name : "unknown") + " (" + std::to_string(ggml_type) + ")";
}

bool tensor_shape_bytes(const std::vector<int64_t>& dims, DType type, uint64_t* bytes, std::string* why) {
  if (dims.empty() || dims.size() > kMaxDims) {
    *why = "has " + std::to_string(dims.size()) + " dims (1 to " + std::to_string(kMaxDims) + " allowed)";
    return false;
  }
  uint64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= 0) {
      *why = "has dim " + std::to_string(i) + " = " + std::to_string(dims[i]) + " (must be > 0)";
      return false;
    }
    if (!mul_ok(n, static_cast<uint64_t>(dims[i]), &n) || n > static_cast<uint64_t>(INT64_MAX)) {
      *why = "has an element count that overflows 64 bits";
      return false;
    }
  }
  const int64_t block = dtype_block_size(type);
  if (dims[0] % block != 0) {
    *why = "has ne0 = " + std::to_string(dims[0]) + ", not a multiple of the " + std::string(dtype_name(type)) +
           " block size " + std::to_string(block);
    return false;
  }
  // Whole blocks only, so bytes = blocks * block_bytes; n / block fits, the product may not.
  if (!mul_ok(n / static_cast<uint64_t>(block), dtype_block_bytes(type), bytes)) {
    *why = "has a byte size that overflows 64 bits";
    return false;
  }
  return true;
}

}  // namespace detail
}  // namespace clover::gguf
