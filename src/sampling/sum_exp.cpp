#include "sampling/sum_exp.h"

#include <cmath>

namespace clover::sampling {

double sum_exp_reference(const float* x, size_t n, double shift) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - shift;
    if (d >= -708.0) sum += std::exp(d);  // false for NaN and -inf
  }
  return sum;
}

namespace detail {
bool sum_exp_avx2_available() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}
}  // namespace detail

double sum_exp(const float* x, size_t n, double shift) {
  return detail::sum_exp_avx2_available() ? detail::sum_exp_avx2(x, n, shift) : sum_exp_reference(x, n, shift);
}

}  // namespace clover::sampling
