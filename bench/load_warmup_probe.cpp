// How fast a freshly loaded --no-mmap copy of a model reads, second by second after the load
// (issue #25; docs/benchmarks.md, session 21). The file is read as the engine reads it
// (gguf::Reader with mmap off: O_DIRECT when it is not cached, else through the page cache with
// the cache dropped behind), then one thread reads random 576 KiB chunks of the copy (the size of
// one expert's gate matrix at the full 35B size: what a decoding step touches once in a while)
// and prints their read rate each second. On a machine whose memory behaves, the rate is flat
// from the first second; on the development VM a copy left read-only (as the loader left it up to
// session 20: --protect 2) started 5-6x lower and took ~8 s to recover.
//
// usage: load_warmup_probe MODEL.gguf [--seconds 20] [--drop-cache 0|1] [--protect 0|1|2]
//   --drop-cache 1  evict the file from the page cache first (the O_DIRECT read)
//   --protect 1     mprotect the copy read-only after the read, then writable again (the loader
//                   up to session 20, for the repack); 2: read-only (its state after the repack)
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "args.h"
#include "gguf/gguf.h"
#include "roofline.h"
#include "runtime/huge_pages.h"
#include "runtime/page_cache.h"

using namespace clover;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  int seconds = 20, drop = 1, protect = 0;
  if (argc < 2 || !bench::parse_int_flags(argc, argv, 2, {{"--seconds", &seconds}, {"--drop-cache", &drop}, {"--protect", &protect}})) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--seconds 20] [--drop-cache 0|1] [--protect 0|1|2]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  if (drop && !runtime::drop_from_page_cache(path)) {
    std::fprintf(stderr, "error: cannot evict %s from the page cache\n", path.c_str());
    return 1;
  }
  gguf::OpenOptions o;
  o.mmap = false;
  const auto t0 = Clock::now();
  std::unique_ptr<gguf::Reader> r;
  try {
    r = gguf::Reader::open(path, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("read %.2f GB in %.1f s (%s)\n", r->file_size() / 1e9, since(t0), r->read_direct() ? "O_DIRECT" : "through the page cache");
  // The copy's tensor bytes: from the first tensor to the end of the last.
  const uint8_t *lo = nullptr, *hi = nullptr;
  for (const gguf::TensorInfo& t : r->tensors()) {
    lo = lo ? std::min(lo, t.data) : t.data;
    hi = std::max(hi, t.data + t.size);
  }
  constexpr size_t kChunk = 576 << 10;
  if (!lo || hi - lo < static_cast<ptrdiff_t>(4 * kChunk)) {
    std::fprintf(stderr, "error: %s: too few tensor bytes to probe\n", path.c_str());
    return 1;
  }
  if (protect) {
    auto* b = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(lo) & ~uintptr_t{runtime::kHugePageBytes - 1});
    const size_t n = runtime::huge_page_round(static_cast<size_t>(hi - b));
    mprotect(b, n, PROT_READ);
    if (protect == 1) mprotect(b, n, PROT_READ | PROT_WRITE);
  }
  std::mt19937_64 rng(1);
  const size_t chunks = static_cast<size_t>(hi - lo) / kChunk;
  uint64_t sink = 0;
  const auto start = Clock::now();
  for (int s = 1; s <= seconds; ++s) {
    double busy = 0;
    size_t n = 0;
    while (since(start) < s) {
      const uint8_t* p = lo + (rng() % chunks) * kChunk;
      const auto c0 = Clock::now();
      sink += bench::read_stream(p, kChunk);
      busy += since(c0);
      ++n;
    }
    std::printf("t = %2d s: random %zu KiB chunks read at %.1f GB/s\n", s, kChunk >> 10, n * kChunk / busy / 1e9);
    std::fflush(stdout);
  }
  return sink == 42 ? 3 : 0;  // (keeps the reads)
}
