// The one full-vocabulary reduction of sampling: sum_i exp(x[i] - shift) over a float row, in double.
// Greedy confidences and log-probabilities need it for every sampled position (250k terms), so it
// has an AVX2 path next to its plain reference twin; tests/sampling compares the two.
#pragma once
#include <cstddef>

namespace clover::sampling {

// sum over i of exp(double(x[i]) - shift); NaN and -inf entries add 0. Meant for shift >= max(x)
// (terms <= 1); terms below exp(-708) are dropped (they cannot change a double sum of >= 1e-308).
double sum_exp(const float* x, size_t n, double shift);

double sum_exp_reference(const float* x, size_t n, double shift);
namespace detail {
bool sum_exp_avx2_available();
double sum_exp_avx2(const float* x, size_t n, double shift);  // needs AVX2 + FMA
}  // namespace detail

}  // namespace clover::sampling
