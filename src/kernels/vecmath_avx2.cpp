// The element-wise math's lane code (vecmath_lanes.inc) compiled with AVX2 + FMA: the twins'
// operations, with std::fma as one instruction.
#define CLOVER_VECMATH_ISA avx2
#include "kernels/vecmath_lanes.inc"
