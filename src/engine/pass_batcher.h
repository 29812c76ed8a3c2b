// Continuous batching of forward passes across sessions.
//
// Every generation running on a session is a participant, each on its own thread (the server runs
// one per busy slot). When a participant needs a forward pass it hands it here and waits. Once
// every participant is waiting, the last one to arrive runs all the waiting passes as one
// stacked pass (Executor::run with several passes: logits identical to running each alone, each
// pass getting its own statistics) and wakes the others. So each round collects the next
// pass of every active generation, whatever its mode: AR decode steps, prompt chunks, denoising
// blocks and spec verify passes of different sessions share one pass.
//
// Passes that do not fit in one pass (more tokens than max_batch together) wait for the next round,
// in arrival order. A lone participant's pass runs alone, so single-session use (the CLI,
// benchmarks) runs exactly as without batching.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>

#include "backend/executor.h"
#include "clover/clover.h"

namespace clover::engine {

class PassBatcher {
 public:
  explicit PassBatcher(backend::Executor& executor) : executor_(executor) {}

  // A generation starts / ends taking part (RAII: Participant).
  void join();
  void leave();

  // Runs one pass of a participant, batched with the others' pending passes; returns when it is
  // done, with the pass's logits and statistics filled in. Its tokens must fit in max_batch
  // (callers chunk longer prompts). Rethrows this pass's error.
  void run(backend::Pass& pass);

  BatchingStats stats() const;

  class Participant {
   public:
    explicit Participant(PassBatcher& b) : b_(b) { b_.join(); }
    ~Participant() { b_.leave(); }
    Participant(const Participant&) = delete;
    Participant& operator=(const Participant&) = delete;

   private:
    PassBatcher& b_;
  };

 private:
  struct Request {
    backend::Pass* pass;
    bool done = false;
    std::exception_ptr error;
  };
  bool ready() const { return !executing_ && !pending_.empty() && static_cast<int>(pending_.size()) >= participants_; }
  void execute(std::unique_lock<std::mutex>& lk);

  backend::Executor& executor_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int participants_ = 0;
  bool executing_ = false;
  std::deque<Request*> pending_;
  BatchingStats stats_;
};

}  // namespace clover::engine
