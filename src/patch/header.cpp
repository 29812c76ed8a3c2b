#include "patch/header.h"

#include <cstring>
#include <string>

namespace clover::patch::detail {

namespace {

using gguf::Value;
using gguf::ValueType;

// Little-endian encoding (GGUF is little-endian, as are our targets).
struct Encoder {
  std::vector<uint8_t> out;
  void bytes(const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, p, n);
  }
  template <typename T>
  void put(T x) {
    bytes(&x, sizeof(T));
  }
  void string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void value(const Value& v) {
    switch (v.type) {
      case ValueType::U8: put<uint8_t>(static_cast<uint8_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::U16: put<uint16_t>(static_cast<uint16_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::U32: put<uint32_t>(static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::U64: put<uint64_t>(std::get<uint64_t>(v.v)); break;
      case ValueType::I8: put<int8_t>(static_cast<int8_t>(std::get<int64_t>(v.v))); break;
      case ValueType::I16: put<int16_t>(static_cast<int16_t>(std::get<int64_t>(v.v))); break;
      case ValueType::I32: put<int32_t>(static_cast<int32_t>(std::get<int64_t>(v.v))); break;
      case ValueType::I64: put<int64_t>(std::get<int64_t>(v.v)); break;
      case ValueType::F32: put<float>(static_cast<float>(std::get<double>(v.v))); break;
      case ValueType::F64: put<double>(std::get<double>(v.v)); break;
      case ValueType::Bool: put<uint8_t>(std::get<bool>(v.v) ? 1 : 0); break;
      case ValueType::String: string(std::get<std::string>(v.v)); break;
      case ValueType::Array: {
        const auto& items = std::get<std::vector<Value>>(v.v);
        put<uint32_t>(static_cast<uint32_t>(v.elem_type));
        put<uint64_t>(items.size());
        for (const Value& item : items) value(item);
        break;
      }
    }
  }
};

}  // namespace

std::vector<uint8_t> encode_header(const PatchPlan& plan) {
  uint64_t n_out = 0;
  for (const auto& t : plan.tensors) n_out += t.action == TensorAction::Drop ? 0 : 1;
  Encoder e;
  e.bytes("GGUF", 4);
  e.put<uint32_t>(plan.version);
  e.put<uint64_t>(n_out);
  e.put<uint64_t>(plan.metadata.size());
  for (const auto& [key, v] : plan.metadata) {
    e.string(key);
    e.put<uint32_t>(static_cast<uint32_t>(v.type));
    e.value(v);
  }
  for (const auto& t : plan.tensors) {
    if (t.action == TensorAction::Drop) continue;
    e.string(t.in->name);
    e.put<uint32_t>(static_cast<uint32_t>(t.in->dims.size()));
    for (int64_t d : t.in->dims) e.put<uint64_t>(static_cast<uint64_t>(d));
    e.put<uint32_t>(static_cast<uint32_t>(t.in->type));
    e.put<uint64_t>(t.out_offset);
  }
  return std::move(e.out);
}

}  // namespace clover::patch::detail
