// Continuous batching of forward passes across sessions.
//
// Every generation running on a session is a participant, each on its own thread (the server runs
// one per busy slot). When a participant needs a forward pass it hands it here and waits. Once
// every participant is waiting, the last one to arrive runs all the waiting passes as one
// multi-sequence pass (Forward::multi: stacked matmuls, per-sequence attention and recurrence,
// logits identical to running each alone) and wakes the others. So each round collects the next
// pass of every active generation, whatever its mode: AR decode steps, prompt chunks, denoising
// blocks and spec verify passes of different sessions share one pass.
//
// Passes that do not fit in one pass (more tokens than max_batch together) wait for the next round,
// in arrival order. A lone participant's pass runs directly (Forward::causal / denoise), so
// single-session use (the CLI, benchmarks) runs exactly as without batching.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>

#include "model/forward.h"

namespace clover::engine {

struct BatchStats {
  uint64_t rounds = 0;           // passes run
  uint64_t sequences = 0;        // sequence passes in them (sequences / rounds = mean batch)
  int max_sequences = 0;         // the most sequences one pass held
};

class PassBatcher {
 public:
  explicit PassBatcher(model::Forward& forward) : forward_(forward) {}

  // A generation starts / ends taking part (RAII: Participant).
  void join();
  void leave();

  // Runs one pass of a participant, batched with the others' pending passes; returns when it is
  // done. Its tokens must fit in max_batch (callers chunk longer prompts). Rethrows this pass's error.
  void run(const model::SeqPass& pass);

  BatchStats stats() const;

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
    const model::SeqPass* pass;
    bool done = false;
    std::exception_ptr error;
  };
  bool ready() const { return !executing_ && !pending_.empty() && static_cast<int>(pending_.size()) >= participants_; }
  void execute(std::unique_lock<std::mutex>& lk);

  model::Forward& forward_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int participants_ = 0;
  bool executing_ = false;
  std::deque<Request*> pending_;
  BatchStats stats_;
};

}  // namespace clover::engine
