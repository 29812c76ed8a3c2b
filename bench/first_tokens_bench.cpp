// A fresh process's first tokens (issue #25; docs/benchmarks.md "Loading and the first tokens"):
// readiness (Engine::load), then N greedy tokens after a one-token prompt, then the same N again
// (the steady rate, every page the first run touched now resident). Prints one markdown row.
//
// usage: first_tokens_bench MODEL.gguf [--tokens 32] [-t 2] [--prefault 0|1|2] [--wait 0|1]
//                           [--drop-cache 0|1] [--mmap 0|1] [--mlock 0|1]
//   --prefault  0 off, 1 background (default), 2 wait (before load returns)
//   --wait 1    after load, wait for the background pre-fault to end before the first tokens
//   --drop-cache 1  evict the file from the page cache first (posix_fadvise DONTNEED: no root
//               needed; pages another process has mapped stay), as after a reboot
//   --mlock 1   lock the mapped weights in memory at load (--mlock: every page read before ready)

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "args.h"
#include "clover/clover.h"
#include "runtime/memory_stats.h"
#include "runtime/page_cache.h"

using namespace clover;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Tokens per second of N greedy tokens after a one-token prompt, on a fresh session.
double generate(Engine& e, int n) {
  auto s = e.new_session();
  GenerateOptions go;
  go.max_tokens = n;
  go.ignore_eos = true;
  const std::vector<int32_t> prompt{1};
  Event last = s->generate(prompt, go, [](const Event&) { return true; });
  return last.stats.generate_seconds > 0 ? last.stats.generated_tokens / last.stats.generate_seconds : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  int tokens = 32, threads = 2, prefault = 1, wait = 0, drop = 0, mmap = 1, mlock = 0;
  if (argc < 2 || !bench::parse_int_flags(argc, argv, 2,
                                          {{"--tokens", &tokens}, {"-t", &threads}, {"--prefault", &prefault}, {"--wait", &wait},
                                           {"--drop-cache", &drop}, {"--mmap", &mmap}, {"--mlock", &mlock}})) {
    std::fprintf(stderr,
                 "usage: first_tokens_bench MODEL.gguf [--tokens 32] [-t 2] [--prefault 0|1|2] [--wait 0|1] [--drop-cache 0|1] "
                 "[--mmap 0|1] [--mlock 0|1]\n");
    return 2;
  }
  try {
    if (drop && !runtime::drop_from_page_cache(argv[1])) throw Error(std::string("cannot evict ") + argv[1] + " from the page cache");
    EngineOptions eo;
    eo.device = "cpu";
    eo.n_threads = threads;
    eo.n_ctx = tokens + 16;
    eo.mmap = mmap != 0;
    eo.mlock = mlock != 0;
    eo.prefault = prefault == 0 ? Prefault::Off : prefault == 2 ? Prefault::Wait : Prefault::Background;
    const auto t0 = Clock::now();
    auto e = Engine::load(argv[1], eo);
    const double ready = since(t0);
    double waited = 0;
    if (wait) {
      const auto tw = Clock::now();
      while (e->prefault_status().state == PrefaultStatus::State::Running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      waited = since(tw);
    }
    const double first = generate(*e, tokens);
    const PrefaultStatus after_first = e->prefault_status();
    const double steady = generate(*e, tokens);
    const char* how = prefault == 0 ? "off" : prefault == 2 ? "wait" : wait ? "background, waited for" : "background, not waited for";
    std::printf("| %s%s%s | %s | %.2f | %.2f | %s %.1f s | %.2f | %.2f | %.2f | %.0f MiB |\n", how, mmap ? "" : " (--no-mmap)",
                mlock ? " (--mlock)" : "",
                drop ? "evicted" : "cached", ready, waited, std::string(prefault_state_name(after_first.state)).c_str(),
                after_first.seconds, first, steady, steady > 0 ? first / steady : 0.0, peak_rss_bytes() / 1048576.0);
    return 0;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "error: %s\n", ex.what());
    return 1;
  }
}
