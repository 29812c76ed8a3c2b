// Conversions between float and the storage types: fp16, bf16 and the ggml block formats.
// The quantisers reproduce ggml's reference quantisers bit for bit (files written by `clover synth`
// and activations rounded for a matmul are identical to what llama.cpp would produce).
#pragma once
#ifdef __F16C__
#include <immintrin.h>
#endif
#include <cstdint>

#include "kernels/dtype.h"

namespace clover::kernels {

float fp16_to_fp32(uint16_t h);
#ifdef __F16C__
// The same conversion by the F16C instruction, inline: for the kernels built with -mf16c, where a
// call per block or super-block scale is a measurable share of a decoding product.
inline float fp16_to_fp32_f16c(uint16_t h) { return _cvtsh_ss(h); }
#endif
uint16_t fp32_to_fp16(float f);  // round to nearest even, as F16C / ggml do
float bf16_to_fp32(uint16_t b);
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN kept quiet, as ggml does

// Writes n values (n a multiple of the block size) of type t.
void quantize_row(DType t, const float* src, void* dst, int64_t n);
// Reads n values of type t.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// The activation quantiser of ggml-cpu on x86 (not the file quantiser above): per block of 32,
// d = fp16(amax / 127), id = amax ? 127 / amax : 0 in fp32, q = round-half-even(x * id).
// This is what Q4_0 / Q8_0 matmuls see as their activation. n a multiple of 32.
void quantize_row_q8_0_activation(const float* src, BlockQ8_0* dst, int64_t n);

}  // namespace clover::kernels
