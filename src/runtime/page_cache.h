// What of a file is in the page cache, and dropping it from there (header-only: the GGUF reader,
// which the fuzz target builds alone, uses it too).
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

namespace clover::runtime {

// The fraction of the pages of [p, p + n) (p page-aligned: a mapping of the file) that are in the
// page cache, from mincore; 1 when it cannot tell.
inline double resident_fraction(const void* p, uint64_t n) {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || n == 0) return 1.0;
  std::vector<unsigned char> in((n + page - 1) / page);
  if (mincore(const_cast<void*>(p), n, in.data()) != 0) return 1.0;
  size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  return static_cast<double>(resident) / static_cast<double>(in.size());
}

// Evicts a file from the page cache (no root needed; pages another process has mapped stay), its
// dirty pages written back first (the kernel keeps those), as after a reboot. False when the file
// cannot be opened or the kernel refuses the advice.
inline bool drop_from_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  fdatasync(fd);
  const bool ok = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

}  // namespace clover::runtime
