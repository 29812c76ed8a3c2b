// Runs generations on N slots, one at a time.
//
// A slot is an engine Session kept across requests: its cache (attention KV + recurrent state)
// holds the last conversation it served, and a new prompt that extends that conversation only
// evaluates the new tokens. A request goes to the idle slot whose cached tokens are the longest
// prefix of its prompt; failing that, an empty slot, then the one sharing the longest prefix (most
// likely an earlier turn of the same conversation, now stale), then the least recently used.
//
// The engine runs one forward pass at a time, and its sessions are not safe to drive from several
// threads, so one worker thread runs one generation at a time; requests wait in a bounded queue
// (full: 503). Interleaving the active slots into shared forward passes (continuous batching)
// needs a batched multi-sequence step in the engine API, which does not exist yet.
//
// Each request is a Job: the HTTP thread submits it and reads its events; the worker fills them.
// Setting Job::cancel (the client went away) makes the engine's EventFn return false, so the
// generation stops after the current pass and the slot is free at once.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "clover/clover.h"
#include "server/api_error.h"
#include "server/metrics.h"

namespace clover::server {

struct JobInput {
  std::string prompt_text;            // tokenised by the worker (parse_special), unless tokens are given
  std::vector<int32_t> prompt_tokens;
  bool max_tokens_given = false;      // else: up to the end of the context
  GenerateOptions options;
};

class Job {
 public:
  explicit Job(JobInput in) : input(std::move(in)) {}
  const JobInput input;
  std::atomic<bool> cancel{false};

  // Consumer side. Waits until the job has events or ended (or the timeout passed); moves the
  // pending events into `out`. Returns false once the job ended and everything was taken.
  bool take(std::vector<Event>& out, std::chrono::milliseconds timeout);
  // Waits until the first event or the end; the error, if the job failed before producing anything.
  std::optional<ApiError> wait_started();
  std::optional<ApiError> error() const;
  int prompt_tokens() const;  // the prompt's full length (known once started)

  // Producer side (the worker).
  void push(const Event& ev);
  void fail(ApiError e);
  void end();
  void set_prompt_tokens(int n);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool started_ = false, ended_ = false;
  std::optional<ApiError> error_;
  int prompt_tokens_ = 0;
};

struct SchedulerOptions {
  int n_slots = 1;
  int max_queue = 64;
};

class Scheduler {
 public:
  Scheduler(Engine& engine, SchedulerOptions opt, Metrics& metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job; throws ApiError 503 when the queue is full.
  std::shared_ptr<Job> submit(JobInput in);
  // Cancels the running and queued jobs (shutdown).
  void cancel_all();
  int n_ctx() const;
  int n_slots() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::vector<int32_t> tokens;  // what the session's cache holds, as far as we know
    std::string text;             // the bytes of `tokens` (for text-prefix matching); valid UTF-8 or empty
    uint64_t last_used = 0;
  };
  void worker_loop();
  void run(Job& job);
  // Picks a slot and the prompt's tokens for it (reusing the slot's tokens for a text prefix).
  size_t pick_slot(const JobInput& in, std::vector<int32_t>& tokens);

  Engine& engine_;
  SchedulerOptions opt_;
  Metrics& metrics_;
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
  std::shared_ptr<Job> running_;  // guarded by mu_

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace clover::server
