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
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,  // activations of Q4_1 / Q5_1 products only; never a weight type here (llama.cpp: same)
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,  // activations of K-quant products only; never a weight type here (llama.cpp: same)
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

constexpr int64_t kQK = 32;   // values per block of the legacy types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1)
constexpr int64_t kQK_K = 256;  // values per K-quant super-block

// Blocks laid out exactly as ggml lays them out (so files are byte-compatible).
struct BlockQ4_0 {
  uint16_t d;       // fp16 scale
  uint8_t qs[16];   // 32 nibbles: low nibbles are values 0..15, high nibbles 16..31; value = (q - 8) * d
};
struct BlockQ8_0 {
  uint16_t d;       // fp16 scale
  int8_t qs[32];    // value = q * d
};
// The other legacy types (kernels/legacy_quant.h has the value accessors). Low nibbles of qs[j]
// are values j (0..15), high nibbles values j + 16; Q5 types take bit 4 of value j from bit j of
// qh read as a little-endian uint32.
struct BlockQ4_1 {
  uint16_t d, m;    // fp16; value = d * q + m, q in 0..15
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;       // fp16; value = d * (q - 16), q in 0..31
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;    // fp16; value = d * q + m, q in 0..31
  uint8_t qh[4];
  uint8_t qs[16];
};
// IQ4_NL: 4-bit indices (nibble order of Q4_0) into a fixed non-linear table of 16 int8 levels
// (kernels/legacy_quant.h, kIq4nlValues); value = d * table[q].
struct BlockIQ4_NL {
  uint16_t d;       // fp16
  uint8_t qs[16];
};
struct BlockQ8_1 {
  uint16_t d;       // fp16; value = q * d
  uint16_t s;       // fp16 of d * (sum of the 32 q), d unrounded (the mins term of Q4_1 / Q5_1)
  int8_t qs[32];
};
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockIQ4_NL) == 18);

// K-quants: a super-block of 256 values in 8 sub-blocks of 32 (Q4_K, Q5_K) or 16 of 16 (Q6_K).
// The 12 scale bytes of Q4_K / Q5_K hold 8 six-bit scales and 8 six-bit mins (kquant.h,
// k4_scale_min); value = d * scale_j * q - dmin * min_j.
struct BlockQ4_K {
  uint16_t d, dmin;   // fp16 super-block scales of the sub-block scales and of the mins
  uint8_t scales[12];
  uint8_t qs[128];    // chunk c of 64 values: low nibbles of qs[32c..32c+31] are values 64c..64c+31, high 64c+32..
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];     // bit c of qh[l]: bit 4 of value 32c + l
  uint8_t qs[128];    // low 4 bits, laid out as Q4_K's
};
struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits (layout: kquant.h, q6_k_value)
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // one per 16 values
  uint16_t d;         // fp16; value = d * scale * (q - 32)
};
// IQ4_XS: IQ4_NL's table in super-blocks of 256 with a 6-bit scale per sub-block of 32.
// Sub-block j: scale ls = (low nibble j % 2 of scales_l[j / 2]) | (bits 2j..2j+1 of scales_h) << 4,
// value = d * (ls - 32) * table[q]; its 16 bytes qs[16j..16j+15] hold values 32j..32j+15 in the low
// nibbles and 32j+16.. in the high nibbles.
struct BlockIQ4_XS {
  uint16_t d;         // fp16
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
// Q2_K: 16 sub-blocks of 16 values; scales[j] holds sub-block j's 4-bit scale (low nibble) and
// 4-bit min (high nibble); value = d * scale * q - dmin * min, q in 0..3 (kquant.h, q2_k_value).
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];     // 2-bit values: value 128h + 32s + l is bits 2s..2s+1 of qs[32h + l]
  uint16_t d, dmin;   // fp16
};
// Q3_K: 16 sub-blocks of 16 values with signed 6-bit scales (kquant.h, q3_k_scale); value =
// d * (scale - 32) * q, q in -4..3: the low 2 bits as Q2_K's, minus 4 when the high bit (bit
// 4h + s of hmask[l] for value 128h + 32s + l) is clear.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;         // fp16
};
struct BlockQ8_K {
  float d;            // value = q * d
  int8_t qs[256];
  int16_t bsums[16];  // sums of the 16 groups of 16 values
};
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_XS) == 136);

// Values per block (1 for plain float types).
int64_t dtype_block_size(DType t);
// Bytes per block.
size_t dtype_block_bytes(DType t);
// Bytes of a row of n values; n must be a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// True for the ggml type ids this engine can compute with as weights (Q8_K is not one).
bool dtype_supported(uint32_t ggml_type);
// The supported weight types, for error messages: "F32, F16, BF16, Q8_0, Q4_0, ...".
std::string_view dtype_supported_list();
// True for the K-quant weight types and IQ4_XS (rows a multiple of 256 values, Q8_K activations).
bool dtype_is_kquant(DType t);
// True for Q4_1, Q5_0, Q5_1 and IQ4_NL (blocks of 32 with their own kernels, matmul_legacy*.cpp).
bool dtype_is_legacy_extra(DType t);

}  // namespace clover
