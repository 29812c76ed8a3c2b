// Software prefetch of the weights a decoding product streams from memory (x86 kernels only).
//
// While a tile computes, the kernels prefetch the bytes they will read a little later, at the
// pace they read them. Where the lines land matters as much as how far ahead:
//
//   L2 (Hint::L2, _MM_HINT_T1)  the stream may run far ahead (a tile, 5-20 KiB) without the lines
//                               evicting each other from the 32 KiB L1 or waiting for the L1's few
//                               miss buffers; the L1's own prefetcher brings them the last step.
//   L1 (Hint::L1, _MM_HINT_T0)  for kernels that read several rows at once from L1 and prefetch
//                               only a short distance ahead.
//
// Each kernel's choice is measured one thread from memory against a plain read alternated call by
// call (kernels_bench `paired/...`); docs/benchmarks.md ("session 18: software prefetch into L2")
// has the ratios. The AVX-512 kernels use L2, except Q8_0 and the Q5_K rows, which measured better
// with L1, as did the AVX2 kernels.
#pragma once
#include <cstddef>
#include <cstdint>

namespace clover::kernels::detail {

// __builtin_prefetch's locality: 3 is prefetcht0, 2 prefetcht1.
enum class Hint { L1 = 3, L2 = 2 };

// One prefetch per 64-byte line of [p, p + Bytes). Prefetches never fault, so running past the
// end of a matrix is harmless.
template <int64_t Bytes, Hint H>
inline __attribute__((always_inline)) void prefetch_span(const uint8_t* p) {
#pragma GCC unroll 16
  for (int64_t l = 0; l < Bytes; l += 64) __builtin_prefetch(p + l, 0, static_cast<int>(H));
}

// The same over a run-time length.
template <Hint H>
inline void prefetch_bytes(const uint8_t* p, size_t bytes) {
  for (size_t l = 0; l < bytes; l += 64) __builtin_prefetch(p + l, 0, static_cast<int>(H));
}

}  // namespace clover::kernels::detail
