// The tiled attention kernel compiled for AVX-512 (chosen at run time by attention.cpp).
#define CLOVER_ATTN_ISA avx512
#include "kernels/attention_tiled.inc"
