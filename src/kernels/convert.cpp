// Scalar conversions between fp32 and fp16 / bf16 / Q4_0 / Q8_0, bit-compatible with ggml (the
// other block types: kquant.cpp, legacy_quant.cpp).
//
// The float <-> half conversions are done with integer arithmetic so that they give the same bits
// as the F16C instructions (round to nearest even, subnormals kept) on any CPU.
#include "kernels/convert.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/kquant.h"
#include "kernels/legacy_quant.h"

namespace clover::kernels {

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in fp32.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t fp32_to_fp16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) {
    // NaN: quiet bit set, payload truncated (what vcvtps2ph does).
    return static_cast<uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  }
  if (u >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16: inf
  if (u < 0x38800000u) {
    // Result is subnormal or zero: adding 0.5 aligns the 10 result bits at the bottom of the
    // mantissa, and the fp32 addition rounds them to nearest even.
    const float magic = std::bit_cast<float>(0x3f000000u);  // 0.5
    const uint32_t r = std::bit_cast<uint32_t>(std::bit_cast<float>(u) + magic) - 0x3f000000u;
    return static_cast<uint16_t>(sign | r);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  // A carry out of the mantissa correctly bumps the exponent (up to inf for [65520, 65536)).
  const uint32_t mant_odd = (u >> 13) & 1u;
  u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + mant_odd;
  return static_cast<uint16_t>(sign | (u >> 13));
}

float bf16_to_fp32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

namespace {

// float -> int32 as cvttss2si / cvtss2si do on x86: out-of-range and NaN give INT32_MIN.
int32_t x86_trunc(float v) {
  return std::fabs(v) < 2147483648.0f ? static_cast<int32_t>(v) : INT32_MIN;
}

// ggml quantize_row_q4_0_ref: the value with the largest magnitude maps to -8.
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      // (int8_t) truncation then min(15, .) on the signed value, as ggml does.
      const int8_t q0 = static_cast<int8_t>(x86_trunc(x[j] * id + 8.5f));
      const int8_t q1 = static_cast<int8_t>(x86_trunc(x[j + kQK / 2] * id + 8.5f));
      const uint8_t u0 = static_cast<uint8_t>(q0 < 15 ? q0 : 15);
      const uint8_t u1 = static_cast<uint8_t>(q1 < 15 ? q1 : 15);
      y[b].qs[j] = static_cast<uint8_t>(u0 | (u1 << 4));
    }
  }
}

// ggml quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (ties away from zero).
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax > a ? amax : a;  // ggml's MAX(amax, fabsf(v))
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[b].qs[j] = static_cast<int8_t>(x86_trunc(std::round(x[j] * id)));
  }
}

}  // namespace

void quantize_row_q8_0_activation(const float* x, BlockQ8_0* y, int64_t n) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: (v + kRound) - kRound rounds v half-even
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax > a ? amax : a;  // maxps semantics
    }
    y[b].d = fp32_to_fp16(amax / 127.0f);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (id <= 3.0e38f) {
      // |x * id| <= 127 (plus rounding), so the conversion cannot overflow.
      for (int j = 0; j < kQK; ++j) {
        y[b].qs[j] = static_cast<int8_t>(static_cast<int32_t>((x[j] * id + kRound) - kRound));
      }
    } else {
      // amax so small that 127 / amax overflows: x86 turns inf / NaN into INT32_MIN, saturated to -128.
      for (int j = 0; j < kQK; ++j) {
        const float v = x[j] * id;
        int32_t q = std::fabs(v) < 4194304.0f ? static_cast<int32_t>((v + kRound) - kRound) : INT32_MIN;
        y[b].qs[j] = static_cast<int8_t>(q < -128 ? -128 : (q > 127 ? 127 : q));
      }
    }
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      break;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      break;
    }
    case DType::Q4_0:
      quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
      break;
    case DType::Q8_0:
      quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
      break;
    case DType::Q2_K: quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), n); break;
    case DType::Q3_K: quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), n); break;
    case DType::Q4_K: quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n); break;
    case DType::Q5_K: quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), n); break;
    case DType::Q6_K: quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n); break;
    case DType::Q8_K: quantize_row_q8_k_activation(src, static_cast<BlockQ8_K*>(dst), n); break;
    case DType::Q4_1: quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), n); break;
    case DType::Q5_0: quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), n); break;
    case DType::Q5_1: quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), n); break;
    case DType::IQ4_NL: quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), n); break;
    case DType::IQ4_XS: quantize_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), n); break;
    case DType::Q8_1: quantize_row_q8_1_activation(src, static_cast<BlockQ8_1*>(dst), n); break;
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      break;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      break;
    }
    case DType::Q4_0: {
      const auto* blk = static_cast<const BlockQ4_0*>(src);
      for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
        const float d = fp16_to_fp32(blk[b].d);
        for (int j = 0; j < kQK / 2; ++j) {
          dst[j] = static_cast<float>((blk[b].qs[j] & 0x0f) - 8) * d;
          dst[j + kQK / 2] = static_cast<float>((blk[b].qs[j] >> 4) - 8) * d;
        }
      }
      break;
    }
    case DType::Q8_0: {
      const auto* blk = static_cast<const BlockQ8_0*>(src);
      for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
        const float d = fp16_to_fp32(blk[b].d);
        for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(blk[b].qs[j]) * d;
      }
      break;
    }
    case DType::Q2_K: dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, n); break;
    case DType::Q3_K: dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, n); break;
    case DType::Q4_K: dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n); break;
    case DType::Q5_K: dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, n); break;
    case DType::Q6_K: dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n); break;
    case DType::Q4_1: dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, n); break;
    case DType::Q5_0: dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, n); break;
    case DType::Q5_1: dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, n); break;
    case DType::IQ4_NL: dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n); break;
    case DType::IQ4_XS: dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n); break;
    case DType::Q8_1: {
      const auto* blk = static_cast<const BlockQ8_1*>(src);
      for (int64_t b = 0; b < n / kQK; ++b, dst += kQK) {
        const float d = fp16_to_fp32(blk[b].d);
        for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(blk[b].qs[j]) * d;
      }
      break;
    }
    case DType::Q8_K: {
      const auto* blk = static_cast<const BlockQ8_K*>(src);
      for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K)
        for (int j = 0; j < kQK_K; ++j) dst[j] = blk[b].d * static_cast<float>(blk[b].qs[j]);
      break;
    }
  }
}

}  // namespace clover::kernels
