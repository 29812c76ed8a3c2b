// Runs generations on N slots at once (continuous batching).
//
// A slot is an engine Session kept across requests: its cache (attention KV + recurrent state,
// with snapshots of the recurrent state) holds the last conversation it served, and a new prompt
// that shares a prefix with it only evaluates the rest. A request goes to the idle slot that can
// reuse the most of its prompt; failing that, an empty slot, then the one sharing the longest
// prefix (most likely an earlier turn of the same conversation, now stale), then the least
// recently used. When no slot is idle it waits in a bounded queue (full: 503).
//
// Every busy slot runs its generation on its own thread; the engine batches their forward passes:
// each round it collects the next pass of every active generation (an AR step, a prompt chunk, a
// denoising block, a spec verify pass) and runs them as one multi-sequence pass (see
// src/engine/pass_batcher.h). Each slot's output is exactly what it would be alone.
//
// Each request is a Job: the HTTP thread submits it and reads its events; the slot fills them.
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

#include "chat/chat_template.h"
#include "clover/clover.h"
#include "server/api_error.h"
#include "server/metrics.h"

namespace clover::server {

// The tokens of prompt[from, to): its literal spans as plain text, the rest with parse_special.
std::vector<int32_t> tokenize_prompt(const Engine& engine, std::string_view prompt, const std::vector<chat::TextSpan>& literal,
                                     size_t from = 0, size_t to = std::string_view::npos);

struct JobInput {
  std::string prompt_text;            // tokenised by the worker (parse_special), unless tokens are given
  std::vector<chat::TextSpan> literal;  // spans of prompt_text tokenised as plain text (chat::RenderedPrompt)
  std::vector<int32_t> prompt_tokens;
  bool max_tokens_given = false;      // else: up to the end of the context
  size_t history_chars = 0;           // chat: prompt_text's length before the generation prompt
  GenerateOptions options;
  bool pass_events = false;           // queue every denoising pass too (see Job::take)
  // Chat: the prompt left a think block open; its budget (-1: unlimited) and the text forced to
  // close it when the budget is spent (server/thinking_budget.h).
  bool thinking_open = false;
  int reasoning_budget = -1;
  std::string reasoning_end;
};

class Job {
 public:
  explicit Job(JobInput in);
  const JobInput input;
  const int64_t id;             // a task id, counted from 0 (GET /slots shows it)
  std::vector<int32_t> tokens;  // the whole prompt, tokenised (set by Scheduler::submit)
  std::atomic<bool> cancel{false};

  // A denoising pass (JobInput::pass_events), queued in order with the events: it came after
  // `before` events had been pushed (counted from the job's start).
  struct Pass {
    uint64_t before = 0;
    BlockEvent block;
  };

  // Consumer side. Waits until the job has events or ended (or the timeout passed); moves the
  // pending events into `out` (and the pending passes into `passes`, when given). Returns false
  // once the job ended and everything was taken.
  bool take(std::vector<Event>& out, std::chrono::milliseconds timeout, std::vector<Pass>* passes = nullptr);
  // Waits until the first event or the end; the error, if the job failed before producing anything.
  std::optional<ApiError> wait_started();
  std::optional<ApiError> error() const;
  int prompt_tokens() const;  // the prompt's full length (known once started)
  std::atomic<int> n_decoded{0};         // tokens generated so far
  std::atomic<int> reasoning_tokens{0};  // of which thinking tokens (when the prompt opened a think block)

  // Producer side (the worker).
  void push(const Event& ev);
  void push_pass(const BlockEvent& b);
  void fail(ApiError e);
  void end();
  void set_prompt_tokens(int n);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  std::deque<Pass> passes_;
  uint64_t pushed_ = 0;  // events pushed so far
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

  // Tokenises the prompt and queues a job; throws ApiError 400 for a prompt that cannot be
  // tokenised, 503 when the queue is full.
  std::shared_ptr<Job> submit(JobInput in);
  // Cancels the running and queued jobs (shutdown).
  void cancel_all();
  int n_ctx() const;
  int n_slots() const { return static_cast<int>(slots_.size()); }

  // What GET /slots reports of each slot.
  struct SlotState {
    int id = 0;
    std::shared_ptr<const Job> job;  // the job it runs; null: idle
    int cached_tokens = 0;           // idle: the tokens its cache holds
  };
  std::vector<SlotState> slot_states();

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::vector<int32_t> tokens;  // what the session's cache holds, as far as we know
    std::string text;             // the bytes of `tokens` (for text-prefix matching); valid UTF-8 or empty
    uint64_t last_used = 0;
    std::shared_ptr<Job> job;     // the job it runs (guarded by mu_); null: idle
    std::vector<int32_t> prompt;  // that job's prompt tokens for this slot
    std::thread thread;
  };
  void slot_loop(Slot& slot);
  void run(Slot& slot, Job& job, std::vector<int32_t> prompt);
  // One generation of a job, with its thinking budget: stops at the budget, forces the closing
  // text, continues. Appends every token to `generated`; returns the merged statistics.
  GenerateStats generate(Slot& slot, Job& job, const std::vector<int32_t>& prompt, GenerateOptions go,
                         std::vector<int32_t>& generated);
  // Hands queued jobs to idle slots (mu_ held).
  void dispatch_locked();
  // The idle slot for a job and the prompt's tokens for it (reusing the slot's tokens for a text
  // prefix); nullptr when every slot is busy (mu_ held).
  Slot* pick_slot(const Job& job, std::vector<int32_t>& tokens);

  Engine& engine_;
  SchedulerOptions opt_;
  Metrics& metrics_;
  std::vector<Slot> slots_;  // sized once: slot threads hold references
  uint64_t clock_ = 0;       // guarded by mu_
  int busy_ = 0;             // guarded by mu_

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
};

}  // namespace clover::server
