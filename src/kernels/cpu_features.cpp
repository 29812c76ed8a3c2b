#include "kernels/cpu_features.h"

#include <atomic>

namespace clover::kernels {

namespace {

int isa_rank(Isa isa) { return static_cast<int>(isa); }

Isa detect_best() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bf16") &&
      __builtin_cpu_supports("gfni") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return Isa::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return Isa::Avx2;
  }
  return Isa::Scalar;
}

std::atomic<Isa>& active_isa() {
  static std::atomic<Isa> isa{isa_best()};
  return isa;
}

}  // namespace

Isa isa_best() {
  static const Isa best = detect_best();
  return best;
}

Isa isa_active() { return active_isa().load(std::memory_order_relaxed); }

void isa_force(Isa isa) {
  active_isa().store(isa_rank(isa) <= isa_rank(isa_best()) ? isa : isa_best(), std::memory_order_relaxed);
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

}  // namespace clover::kernels
