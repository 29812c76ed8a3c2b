// Bringing a mapped model file's bytes into memory ahead of use (issue #25).
//
// The CPU backend computes from a read-only mapping of the model file. A fresh process then pays
// a page fault (and, when the page cache lost the file, a disk read) the first time each routed
// expert is used, so its first tokens run well below the steady rate. Two remedies, both walking
// the weights in the order the forward pass uses them (model::weights_in_use_order):
//
//   BackgroundPrefault  a low-priority thread (SCHED_IDLE, lowest best-effort I/O priority) that
//                       populates the page tables step by step after the model is ready: readiness
//                       is not delayed, and it takes no lock a pass could wait on (progress is
//                       atomics; each step is one madvise call of kStepBytes). It stops at the
//                       next step when asked, and its destructor waits for that.
//   lock_ranges         mlock (--mlock), step by step with progress: the pages are faulted in and
//                       kept; stops at the first refusal (RLIMIT_MEMLOCK) with the reason.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace clover::runtime {

using ByteRanges = std::vector<std::span<const uint8_t>>;

// Called after each step with the bytes done so far (of the ranges' total).
using StepFn = std::function<void(uint64_t done, uint64_t total)>;

constexpr uint64_t kStepBytes = uint64_t{4} << 20;

uint64_t total_bytes(const ByteRanges& ranges);

// Faults the ranges in, in order, one step at a time: MADV_POPULATE_READ (Linux 5.14+: page tables
// filled without a fault per page), else MADV_WILLNEED and one read per page. Checks `stop` (when
// given) before each step. Returns the bytes done.
uint64_t prefault_ranges(const ByteRanges& ranges, const std::atomic<bool>* stop, const StepFn& on_step);

struct LockResult {
  uint64_t locked = 0;  // bytes locked, from the start of the ranges
  int error = 0;        // errno of the refusal; 0: every range is locked
};
// mlock()s the ranges in order, one step at a time, until done or refused.
LockResult lock_ranges(const ByteRanges& ranges, const StepFn& on_step);

// A message for a refused lock naming the limit and how to raise it (as llama.cpp words it).
std::string lock_refusal_message(const LockResult& r, uint64_t total);

class BackgroundPrefault {
 public:
  enum class State { Running, Done, Stopped };
  struct Status {
    State state = State::Running;
    uint64_t done = 0, total = 0;
    double seconds = 0;  // since the start; at the end, the time the walk took
  };
  struct Options {
    uint64_t step_bytes = kStepBytes;
    std::chrono::microseconds pause{0};  // between steps (tests: a walk that is still running)
  };

  // Starts the thread. on_step (optional) is called from it after every step.
  BackgroundPrefault(ByteRanges ranges, StepFn on_step, Options opts);
  BackgroundPrefault(ByteRanges ranges, StepFn on_step) : BackgroundPrefault(std::move(ranges), std::move(on_step), Options{}) {}
  ~BackgroundPrefault();  // stop()
  BackgroundPrefault(const BackgroundPrefault&) = delete;
  BackgroundPrefault& operator=(const BackgroundPrefault&) = delete;

  // Asks the walk to end after its current step and waits for the thread. Idempotent.
  void stop();
  Status status() const;

 private:
  void walk();

  ByteRanges ranges_;
  StepFn on_step_;
  Options opts_;
  uint64_t total_ = 0;
  std::chrono::steady_clock::time_point t0_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> done_{0};
  std::atomic<int> state_{static_cast<int>(State::Running)};
  std::atomic<int64_t> elapsed_ns_{-1};  // set when the walk ends
  std::thread thread_;
};

}  // namespace clover::runtime
