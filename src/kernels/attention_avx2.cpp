// The tiled attention kernel compiled for AVX2 + FMA + F16C (chosen at run time by attention.cpp).
#define CLOVER_ATTN_ISA avx2
#include "kernels/attention_tiled.inc"
