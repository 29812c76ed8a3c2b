// What this CPU can run: the instruction-set families the kernels have paths for, detected once
// (cpuid through the compiler's builtins). Every kernel dispatches on isa_active(); tests and
// benchmarks force each available path with isa_force() and compare it with the scalar twin.
#pragma once
#include <string_view>

namespace clover::kernels {

// Avx512: F, BW, VL, VNNI, VBMI, BF16 with FMA and F16C (the int8 and bf16 dot products);
// Avx2: AVX2 with FMA and F16C; Scalar: plain C++.
enum class Isa { Scalar, Avx2, Avx512 };
Isa isa_best();            // what the CPU supports
Isa isa_active();          // what the kernels use now (isa_best() unless forced)
void isa_force(Isa isa);   // clamps to what the CPU supports
std::string_view isa_name(Isa isa);

}  // namespace clover::kernels
