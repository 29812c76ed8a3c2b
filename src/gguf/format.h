// Internal to src/gguf: format constants and helpers shared by the reader and the writer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace clover::gguf::detail {

inline constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;
// Arrays of arrays are allowed; deeper nesting than this is only seen in hostile files.
inline constexpr int kMaxArrayDepth = 8;
inline constexpr const char* kAlignmentKey = "general.alignment";

// Encoded size of a scalar value type; 0 for String and Array (variable-sized) and unknown ids.
size_t scalar_size(ValueType t);
bool is_valid_value_type(uint32_t t);
// Smallest encoded size of one value of this type (a string is at least its u64 length, an array
// its u32 type + u64 count); used to reject counts that cannot fit in the bytes left.
size_t min_encoded_size(ValueType t);

// "Q4_K (12)" for a ggml type id, known to this engine or not.
std::string ggml_type_label(uint32_t ggml_type);

// Validates a tensor shape for `type` (1..4 dims, each > 0, element count and byte size without
// overflow, ne0 a multiple of the block size) and returns its size in bytes; on failure returns
// false with the reason in *why.
bool tensor_shape_bytes(const std::vector<int64_t>& dims, DType type, uint64_t* bytes, std::string* why);

// Checked arithmetic: false on overflow.
inline bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }
inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }  // caller checks overflow

}  // namespace clover::gguf::detail
