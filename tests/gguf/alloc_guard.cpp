// Fails the test binary loudly if any single allocation exceeds 1 GiB: a corrupt file must never
// make the reader allocate from an untrusted size. (Not used under ASan, which replaces operator new
// itself; there, run with ASAN_OPTIONS=max_allocation_size_mb=1024.)
#include <cstdio>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define CLOVER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLOVER_ASAN 1
#endif
#endif

#ifndef CLOVER_ASAN
namespace {
void* guarded_alloc(std::size_t n) {
  if (n > (std::size_t{1} << 30)) {
    std::fprintf(stderr, "alloc_guard: allocation of %zu bytes\n", n);
    std::abort();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace
void* operator new(std::size_t n) { return guarded_alloc(n); }
void* operator new[](std::size_t n) { return guarded_alloc(n); }
#endif
