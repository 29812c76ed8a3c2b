// Known values for fp16 / bf16 and the ggml block quantisers (file and activation rounding).
#include <gtest/gtest.h>

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cpu_features.h"
#include "kernels/dtype.h"
#include "kernels/kquant.h"
#include "kernels/matmul.h"

namespace clover::kernels {
namespace {

float bits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(DType, SizesNamesAndIds) {
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 64), 68u);
  EXPECT_EQ(dtype_row_bytes(DType::F16, 3), 6u);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 3), 6u);
  EXPECT_EQ(dtype_row_bytes(DType::F32, 3), 12u);
  EXPECT_EQ(dtype_block_size(DType::Q4_0), 32);
  EXPECT_EQ(dtype_block_size(DType::F16), 1);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_K, 512), 288u);
  EXPECT_EQ(dtype_row_bytes(DType::Q5_K, 256), 176u);
  EXPECT_EQ(dtype_row_bytes(DType::Q6_K, 256), 210u);
  EXPECT_EQ(dtype_block_size(DType::Q6_K), 256);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
    EXPECT_TRUE(dtype_supported(static_cast<uint32_t>(t)));
  }
  EXPECT_EQ(dtype_from_name("q4_0"), DType::Q4_0);
  EXPECT_EQ(dtype_from_name("q6_k"), DType::Q6_K);
  EXPECT_FALSE(dtype_from_name("Q8_K").has_value());  // activations only
  EXPECT_FALSE(dtype_supported(15));                  // Q8_K
  EXPECT_FALSE(dtype_supported(16));                  // IQ2_XXS
  EXPECT_EQ(dtype_row_bytes(DType::Q2_K, 512), 168u);
  EXPECT_EQ(dtype_row_bytes(DType::Q3_K, 256), 110u);
  EXPECT_EQ(dtype_from_name("q3_k"), DType::Q3_K);
  EXPECT_TRUE(dtype_supported(3));                    // Q4_1
  EXPECT_FALSE(dtype_supported(9));                   // Q8_1: activations only
  EXPECT_FALSE(dtype_from_name("Q8_1").has_value());
  EXPECT_EQ(dtype_supported_list(), "F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS");
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // tie at the top rounds to even = inf
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);        // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);        // tie -> even (0)
  EXPECT_EQ(fp32_to_fp16(0x3p-25f), 0x0002);        // 1.5 units -> 2
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);        // smallest normal
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);  // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x3p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  const uint16_t nan = fp32_to_fp16(NAN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x8400), -0x1p-14f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7c00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
}

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN payloads
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

// The software conversion must give the bits of vcvtps2ph (round to nearest even).
__attribute__((target("f16c"))) uint16_t f16c_convert(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, 0));
}

TEST(Fp16, MatchesF16CHardware) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    if (i % 2) u = (u & 0x807fffffu) | ((100u + u % 50u) << 23);  // concentrate on the half range
    const float f = bits(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), f16c_convert(f)) << std::hex << u;
  }
}

TEST(Bf16, KnownValues) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(bits(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(bits(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf, as ggml
  EXPECT_EQ(fp32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(bits(0x7f800001u)), 0x7fc0);  // signalling NaN made quiet
  EXPECT_EQ(fp32_to_bf16(bits(0xffc00000u)), 0xffc0);
  EXPECT_EQ(fp32_to_bf16(bits(0x00010000u)), 0x0001);  // subnormals kept
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xc000), -2.0f);
}

TEST(Q4_0, NegativeMaxMapsToMinusEight) {
  float x[32] = {};
  x[0] = -4.0f;  // largest magnitude, negative: d = -4 / -8 = 0.5
  x[1] = 2.0f;
  x[2] = 1.0f;
  x[16] = 4.0f;  // same magnitude, later: does not win (strict <); (4 * 2 + 8.5) -> 16 -> clamped 15
  x[17] = -1.2f;
  BlockQ4_0 b;
  quantize_row(DType::Q4_0, x, &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(0.5f));
  EXPECT_EQ(b.qs[0] & 0x0f, 0);   // -4 * 2 + 8.5 = 0.5 -> 0
  EXPECT_EQ(b.qs[1] & 0x0f, 12);  // 2 * 2 + 8.5 = 12.5 -> 12
  EXPECT_EQ(b.qs[2] & 0x0f, 10);
  EXPECT_EQ(b.qs[3] & 0x0f, 8);   // zero
  EXPECT_EQ(b.qs[0] >> 4, 15);
  EXPECT_EQ(b.qs[1] >> 4, 6);     // -2.4 + 8.5 = 6.1 -> 6
  float y[32];
  dequantize_row(DType::Q4_0, &b, y, 32);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[17], -1.0f);
}

TEST(Q4_0, PositiveMaxAndZeroBlock) {
  float x[64] = {};
  x[5] = 8.0f;  // d = -1, id = -1
  x[6] = -3.0f;
  BlockQ4_0 b[2];
  quantize_row(DType::Q4_0, x, b, 64);
  EXPECT_EQ(fp16_to_fp32(b[0].d), -1.0f);
  EXPECT_EQ(b[0].qs[5] & 0x0f, 0);   // -8 + 8.5 -> 0: value (0 - 8) * -1 = 8
  EXPECT_EQ(b[0].qs[6] & 0x0f, 11);  // 3 + 8.5 -> 11: value -3
  EXPECT_EQ(b[1].d, 0x8000);         // all-zero block: d = 0 / -8 = -0 (as ggml writes it), q = 8
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b[1].qs[j], 0x88);
}

TEST(Q8_0, FileQuantiserRoundsHalfAwayFromZero) {
  float x[32] = {};
  x[0] = 127.0f;  // d = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  x[5] = 1.5f;
  BlockQ8_0 b;
  quantize_row(DType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 1);
  EXPECT_EQ(b.qs[4], -1);
  EXPECT_EQ(b.qs[5], 2);
}

TEST(Q8_0, ActivationQuantiserRoundsHalfToEven) {
  float x[64] = {};
  x[0] = -127.0f;  // amax 127: id = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  x[5] = 1.5f;
  x[6] = 3.5f;
  x[7] = -126.5f;
  BlockQ8_0 b[2];
  quantize_row_q8_0_activation(x, b, 64);
  EXPECT_EQ(b[0].d, 0x3c00);
  const int8_t want[8] = {-127, 2, -2, 0, 0, 2, 4, -126};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(b[0].qs[j], want[j]) << j;
  EXPECT_EQ(b[1].d, 0);  // zero block
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b[1].qs[j], 0);
}

TEST(Q8_0, ActivationScaleIsComputedAsGgmlDoes) {
  // id = 127 / amax (not 1 / (amax / 127)); they differ in the last bit for some amax, which
  // moves values near .5 to the other side.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(32 * 256);
  for (float& v : x) v = u(rng);
  std::vector<BlockQ8_0> b(256);
  quantize_row_q8_0_activation(x.data(), b.data(), static_cast<int64_t>(x.size()));
  for (int blk = 0; blk < 256; ++blk) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
    const float id = 127.0f / amax;
    EXPECT_EQ(b[blk].d, fp32_to_fp16(amax / 127.0f));
    for (int j = 0; j < 32; ++j) {
      ASSERT_EQ(b[blk].qs[j], static_cast<int8_t>(std::nearbyint(x[blk * 32 + j] * id)));
    }
  }
}

TEST(Quantise, RoundTripErrorIsBounded) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 32 * 64;
  std::vector<float> x(n), y(n);
  for (float& v : x) v = nd(rng);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0}) {
    std::vector<uint8_t> buf(dtype_row_bytes(t, n));
    quantize_row(t, x.data(), buf.data(), n);
    dequantize_row(t, buf.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      const float tol = t == DType::Q4_0 ? amax / 8 + amax * 1e-3f : t == DType::Q8_0 ? amax / 127 * 0.5f + amax * 1e-3f
                        : t == DType::BF16 ? amax / 128 : t == DType::F16 ? amax / 1024 : 0.0f;
      for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), tol * 1.01f) << dtype_name(t);
    }
  }
}

}  // namespace
}  // namespace clover::kernels

namespace clover::kernels {
namespace {

// The Q8_K activation quantiser of every ISA (ActRows::convert) gives the scalar twin's bytes
// (the twin is ggml's, GgmlKQuant.Q8KActivationQuantiserIsBitIdentical), on the blocks where a
// vector version can go wrong: zero blocks, ties of the largest magnitude with either sign first,
// NaN and infinities, denormals, values that round half-way, and random blocks of any scale.
TEST(Q8_K, ActivationQuantiserPathsAgreeOnEdgeCases) {
  constexpr int64_t kBlocks = 64, kCols = 256 * kBlocks;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kCols));
  for (int64_t b = 0; b < kBlocks; ++b) {
    float* v = x.data() + b * 256;
    const float scale = std::ldexp(1.0f, static_cast<int>(b % 40) - 20);
    for (int j = 0; j < 256; ++j) v[j] = nd(rng) * scale;
    switch (b % 8) {
      case 0: std::fill(v, v + 256, 0.0f); break;                   // all zero
      case 1: v[17] = 9.0f * scale, v[200] = -9.0f * scale; break;   // tie, positive first
      case 2: v[3] = -9.0f * scale, v[90] = 9.0f * scale; break;     // tie, negative first
      case 3: v[5] = std::nanf(""); break;                           // NaN is skipped by the max
      case 4: for (int j = 0; j < 256; ++j) v[j] = (j - 128) * 0.5f * scale; break;  // half-way values
      case 5: for (int j = 0; j < 256; ++j) v[j] = std::ldexp(static_cast<float>(j % 7) - 3, -140); break;
      case 6: v[255] = -std::numeric_limits<float>::infinity(); break;
      default: break;
    }
  }
  std::vector<BlockQ8_K> twin(kBlocks);
  quantize_row_q8_k_activation(x.data(), twin.data(), kCols);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
    isa_force(isa);
    ActRows a;
    a.convert(x.data(), 1, kCols, kCols, DType::Q8_K);
    isa_force(isa_best());
    const auto* got = static_cast<const BlockQ8_K*>(a.row(0));
    for (int64_t b = 0; b < kBlocks; ++b)
      EXPECT_EQ(0, std::memcmp(&got[b], &twin[b], sizeof(BlockQ8_K))) << isa_name(isa) << " block " << b;
  }
}

}  // namespace
}  // namespace clover::kernels
