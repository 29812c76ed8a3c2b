// Element and block types of weight tensors, numbered as GGUF/ggml number them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace clover {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  BF16 = 30,
};

constexpr int64_t kQK = 32;  // values per Q4_0 / Q8_0 block

// Blocks laid out exactly as ggml lays them out (so files are byte-compatible).
struct BlockQ4_0 {
  uint16_t d;       // fp16 scale
  uint8_t qs[16];   // 32 nibbles: low nibbles are values 0..15, high nibbles 16..31; value = (q - 8) * d
};
struct BlockQ8_0 {
  uint16_t d;       // fp16 scale
  int8_t qs[32];    // value = q * d
};
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ8_0) == 34);

// Values per block (1 for plain float types).
int64_t dtype_block_size(DType t);
// Bytes per block.
size_t dtype_block_bytes(DType t);
// Bytes of a row of n values; n must be a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// True for the ggml type ids this engine can compute with.
bool dtype_supported(uint32_t ggml_type);

}  // namespace clover
