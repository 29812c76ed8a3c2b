// Memory in transparent huge pages, for what a step or a load streams whole: the weights read
// into memory under --no-mmap (gguf/reader.cpp), the Gated DeltaNet state that every decode step
// reads and writes back (2 MiB a layer at Clover's size, 63 MiB for 30 layers), the benchmarks'
// buffers.
//
// In 4 KiB pages such a stream crosses a page every 4 KiB: the hardware prefetchers stop at each
// page boundary and every page costs a TLB entry. map_huge places the memory on 2 MiB boundaries
// and advises it for transparent huge pages (MADV_HUGEPAGE: the kernel's default "madvise" mode
// gives huge pages only to memory that asks). Whether the kernel grants them is its choice;
// nothing depends on it but speed.
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace clover::runtime {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// The length of what map_huge gives for `bytes`: whole huge pages, at least one.
inline size_t huge_page_round(size_t bytes) {
  return bytes == 0 ? kHugePageBytes : (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// Private anonymous memory for `bytes` (zero until written; pages appear on first touch), starting
// on a huge-page boundary, huge_page_round(bytes) long, readable and writable. noreserve: no swap
// space is reserved (MAP_NORESERVE), for copies as large as the machine's memory. nullptr when
// the kernel refuses or the length does not fit in a size_t (errno says why). Release with
// unmap_huge(p, bytes).
inline void* map_huge(size_t bytes, bool noreserve = false) {
  if (bytes > static_cast<size_t>(-1) - 2 * kHugePageBytes) {  // whole + a page of slack would wrap
    errno = ENOMEM;
    return nullptr;
  }
  const size_t whole = huge_page_round(bytes), want = whole + kHugePageBytes;
  void* m = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0), -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<uintptr_t>(m);
  const uintptr_t start = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes, end = start + whole;
  if (start > begin) munmap(m, start - begin);  // the mapping is trimmed to [start, end)
  if (begin + want > end) munmap(reinterpret_cast<void*>(end), begin + want - end);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(start), whole, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void*>(start);
}

inline void unmap_huge(void* p, size_t bytes) {
  if (p) munmap(p, huge_page_round(bytes));
}

// A std allocator: arrays of a huge page or more from map_huge, smaller ones on cache lines.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator

  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    void* p = bytes >= kHugePageBytes ? map_huge(bytes) : std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) >= kHugePageBytes) unmap_huge(p, n * sizeof(T));
    else std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

template <class T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace clover::runtime
