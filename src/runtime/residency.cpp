#include "runtime/residency.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace clover::runtime {

namespace {

uint64_t page_size() {
  static const uint64_t p = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// [p, p + n) widened to whole pages, as madvise and mlock want.
std::pair<uint8_t*, size_t> page_span(const uint8_t* p, uint64_t n) {
  const uint64_t page = page_size();
  const uintptr_t b = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  return {reinterpret_cast<uint8_t*>(b), e - b};
}

void fault_in(const uint8_t* p, uint64_t n) {
  auto [b, len] = page_span(p, n);
#ifdef MADV_POPULATE_READ
  if (madvise(b, len, MADV_POPULATE_READ) == 0) return;
  // Any refusal but "not supported" (EFAULT: the file was truncated under the mapping) is left to
  // the engine's check before each pass: reading those pages here would raise SIGBUS.
  if (errno != EINVAL) return;
#endif
  madvise(b, len, MADV_WILLNEED);
  volatile uint8_t sink = 0;
  for (uint64_t off = 0; off < n; off += page_size()) sink = sink + p[off];
  if (n > 0) sink = sink + p[n - 1];
  (void)sink;
}

// Calls fn(ptr, len) on consecutive steps of at most `step` bytes over the ranges, in order, while
// fn returns true; returns the bytes done.
template <class Fn>
uint64_t for_each_step(const ByteRanges& ranges, uint64_t step, Fn&& fn) {
  uint64_t done = 0;
  for (const auto& r : ranges) {
    for (uint64_t off = 0; off < r.size(); off += step) {
      const uint64_t n = std::min<uint64_t>(step, r.size() - off);
      if (!fn(r.data() + off, n, done + n)) return done;
      done += n;
    }
  }
  return done;
}

uint64_t prefault_steps(const ByteRanges& ranges, uint64_t step, std::chrono::microseconds pause, const std::atomic<bool>* stop,
                        const std::function<void(uint64_t)>& done_now) {
  return for_each_step(ranges, step, [&](const uint8_t* p, uint64_t n, uint64_t done) {
    if (stop && stop->load(std::memory_order_relaxed)) return false;
    fault_in(p, n);
    done_now(done);
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    return true;
  });
}

// The calling thread runs only when a core would otherwise idle, and its disk reads go after
// everyone else's: the pre-fault never takes a core or the disk from a pass.
void lower_this_thread() {
  sched_param sp{};
  if (sched_setscheduler(0, SCHED_IDLE, &sp) != 0) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
#ifdef SYS_ioprio_set
  constexpr int kWhoProcess = 1, kClassBestEffort = 2, kClassShift = 13, kLowest = 7;
  syscall(SYS_ioprio_set, kWhoProcess, 0, (kClassBestEffort << kClassShift) | kLowest);
#endif
}

}  // namespace

uint64_t total_bytes(const ByteRanges& ranges) {
  uint64_t n = 0;
  for (const auto& r : ranges) n += r.size();
  return n;
}

uint64_t prefault_ranges(const ByteRanges& ranges, const std::atomic<bool>* stop, const StepFn& on_step) {
  const uint64_t total = total_bytes(ranges);
  return prefault_steps(ranges, kStepBytes, std::chrono::microseconds{0}, stop, [&](uint64_t done) {
    if (on_step) on_step(done, total);
  });
}

LockResult lock_ranges(const ByteRanges& ranges, const StepFn& on_step) {
  const uint64_t total = total_bytes(ranges);
  LockResult r;
  r.locked = for_each_step(ranges, kStepBytes, [&](const uint8_t* p, uint64_t n, uint64_t done) {
    auto [b, len] = page_span(p, n);
    if (mlock(b, len) != 0) {
      r.error = errno;
      return false;
    }
    if (on_step) on_step(done, total);
    return true;
  });
  return r;
}

std::string lock_refusal_message(const LockResult& r, uint64_t total) {
  std::string msg = "--mlock: locking the weights in memory was refused after " + std::to_string(r.locked >> 20) + " of " +
                    std::to_string(total >> 20) + " MiB (" + std::strerror(r.error) + "); the rest stays unlocked";
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    msg += ". RLIMIT_MEMLOCK is " + std::to_string(lim.rlim_cur >> 10) +
           " KiB: raise it ('ulimit -l unlimited' as root, or memlock in /etc/security/limits.conf)";
  }
  return msg;
}

BackgroundPrefault::BackgroundPrefault(ByteRanges ranges, StepFn on_step, Options opts)
    : ranges_(std::move(ranges)),
      on_step_(std::move(on_step)),
      opts_(opts),
      total_(total_bytes(ranges_)),
      t0_(std::chrono::steady_clock::now()) {
  if (opts_.step_bytes == 0) opts_.step_bytes = kStepBytes;
  thread_ = std::thread([this] { walk(); });
}

BackgroundPrefault::~BackgroundPrefault() { stop(); }

void BackgroundPrefault::stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void BackgroundPrefault::walk() {
  lower_this_thread();
  const uint64_t done = prefault_steps(ranges_, opts_.step_bytes, opts_.pause, &stop_, [this](uint64_t d) {
    done_.store(d, std::memory_order_relaxed);
    if (on_step_) on_step_(d, total_);
  });
  elapsed_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count(),
                    std::memory_order_relaxed);
  state_.store(static_cast<int>(done == total_ ? State::Done : State::Stopped), std::memory_order_release);
}

BackgroundPrefault::Status BackgroundPrefault::status() const {
  Status s;
  s.state = static_cast<State>(state_.load(std::memory_order_acquire));
  s.done = done_.load(std::memory_order_relaxed);
  s.total = total_;
  const int64_t ns = elapsed_ns_.load(std::memory_order_relaxed);
  s.seconds = s.state != State::Running && ns >= 0
                  ? ns * 1e-9
                  : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  return s;
}

}  // namespace clover::runtime
