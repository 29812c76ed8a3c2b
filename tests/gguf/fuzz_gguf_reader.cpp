// libFuzzer target for the GGUF reader (build with -DCLOVER_FUZZ=ON and clang).
// Each input is written to a memfd and opened through /proc/self/fd, so the real mmap path runs.
// Run: fuzz_gguf_reader -max_len=4096 -rss_limit_mb=2048 -malloc_limit_mb=1024 tests/gguf/fuzz_corpus
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "gguf/gguf.h"

namespace {

int memfd() {
  static const int fd = [] {
    const int f = memfd_create("gguf-fuzz", MFD_CLOEXEC);
    if (f < 0) std::abort();
    return f;
  }();
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd();
  if (ftruncate(fd, 0) != 0) std::abort();
  for (size_t off = 0; off < size;) {
    const ssize_t w = pwrite(fd, data + off, size - off, static_cast<off_t>(off));
    if (w <= 0) std::abort();
    off += static_cast<size_t>(w);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    auto r = clover::gguf::Reader::open(path);
    // Use what a loader would use: every typed getter and every tensor byte range's ends.
    for (const auto& [key, value] : r->metadata()) {
      try { (void)r->get_u32_opt(key); } catch (const clover::gguf::GgufError&) {}
      try { (void)r->get_f32_opt(key); } catch (const clover::gguf::GgufError&) {}
      try { (void)r->get_str_opt(key); } catch (const clover::gguf::GgufError&) {}
      try { (void)r->get_bool_opt(key); } catch (const clover::gguf::GgufError&) {}
      try { (void)r->get_str_array(key); } catch (const clover::gguf::GgufError&) {}
      try { (void)r->get_int_array(key); } catch (const clover::gguf::GgufError&) {}
      try { (void)r->get_f32_array(key); } catch (const clover::gguf::GgufError&) {}
    }
    volatile uint8_t sink = 0;
    for (const auto& t : r->tensors()) {
      if (r->tensor(t.name) != &t) std::abort();
      if (t.n_elements() <= 0 || t.size == 0) std::abort();
      sink = sink + t.data[0] + t.data[t.size - 1];
    }
  } catch (const clover::gguf::GgufError&) {
  }
  return 0;
}
