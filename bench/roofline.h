// The memory roofline of the plain C++ benchmarks: a streaming read, 64-byte loads where the CPU
// has them (16-byte loads read slower here), software-prefetched `prefetch` bytes ahead. Shared
// by kernels_bench (one thread, call by call against a kernel) and expert_runner_bench (every
// thread of the pool, over huge pages: bench/timing.h HugeBuffer).
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace clover::bench {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12, inside _mm512_reduce_add_epi64
__attribute__((target("avx512f"))) inline uint64_t read_stream_avx512(const uint8_t* p, size_t bytes, size_t prefetch) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    for (int j = 0; j < 4; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 64 * j) + prefetch, _MM_HINT_T0);
      acc[j] = _mm512_add_epi64(acc[j], _mm512_loadu_si512(p + i + 64 * j));
    }
  }
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(
      _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3]))));
}
#pragma GCC diagnostic pop

// The sum of the 64-bit words of [p, p + bytes) (bytes a multiple of 256), read as a stream.
inline uint64_t read_stream(const uint8_t* p, size_t bytes, size_t prefetch = 4096) {
  if (__builtin_cpu_supports("avx512f")) return read_stream_avx512(p, bytes, prefetch);
  __m128i acc[4] = {};
  const auto* q = reinterpret_cast<const __m128i*>(p);
  for (size_t i = 0; i + 4 <= bytes / 16; i += 4) {
    _mm_prefetch(reinterpret_cast<const char*>(q + i) + prefetch, _MM_HINT_T0);
    for (int j = 0; j < 4; ++j) acc[j] = _mm_add_epi64(acc[j], _mm_loadu_si128(q + i + j));
  }
  acc[0] = _mm_add_epi64(_mm_add_epi64(acc[0], acc[1]), _mm_add_epi64(acc[2], acc[3]));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(acc[0]));
}

}  // namespace clover::bench
