// One generation for an HTTP request, shared by every generation endpoint (chat completions,
// completions, the Responses and the Messages APIs): the request goes to the scheduler, then its
// events are either collected whole or streamed through the endpoint's StreamWriter, which turns
// them into that API's wire format. Internal to src/server.
#pragma once
#include <httplib.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "server/chat_stream.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "server/server_state.h"

namespace clover::server {

// A whole generation (non-streaming).
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;  // when the request asked for them
  Event last;  // the final event: finish reason and statistics
};

// Waits for the whole generation and returns it; throws the job's error. When the client closes
// the connection meanwhile, cancels the job, sets the status to 499 (nobody receives it; counted
// in /metrics) and returns nullopt: there is nobody to answer. `each` (when set) sees every event
// in order as it arrives.
std::optional<Collected> collect(Job& job, const httplib::Request& req, httplib::Response& res,
                                 const std::function<void(const Event&)>& each = {});

// What a streaming endpoint sends for a job's events. Each method returns the bytes to write
// (several SSE events at once are fine; empty: nothing).
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Before any event; the job has started, so its prompt length is known.
  virtual std::string start(const Job& job) = 0;
  // Every event in order, the final one included (its text comes before finish()).
  virtual std::string event(const Event& ev) = 0;
  // After the final event: the closing events of the API, its usage, its end marker.
  virtual std::string finish(const Event& last, const Job& job) = 0;
  // The job failed after the stream started: the error in-band, then the stream closes.
  virtual std::string fail(const ApiError& e) = 0;
  // A denoising pass (only when wants_passes()): sent before the text it committed.
  virtual bool wants_passes() const { return false; }
  virtual std::string pass(const BlockEvent&) { return {}; }
};

// Answers as text/event-stream through `writer`. An error before anything was generated (context
// overflow, an unsupported mode) is thrown instead: a plain error response with its status.
void start_stream(const httplib::Request& req, httplib::Response& res, std::shared_ptr<Job> job,
                  std::unique_ptr<StreamWriter> writer);

// Submits a generation (the prompt given as text, or r.prompt_tokens; `literal`: spans of the text
// to tokenise as plain text, chat::RenderedPrompt::literal); `history_chars` is the
// length of a chat prompt before its generation prompt; `thinking_open` that the prompt ends inside
// a think block (the reasoning budget counts from there). 400 when the prompt cannot fit, or when
// the mode needs denoising passes the device does not run.
std::shared_ptr<Job> submit(ServerState& st, const CompletionRequest& r, std::string prompt_text,
                            std::vector<chat::TextSpan> literal = {}, size_t history_chars = 0,
                            bool thinking_open = false);

// usage, with OpenAI's completion_tokens_details.reasoning_tokens when the output started in a
// think block.
json job_usage(const Job& job, const GenerateStats& s);

// Renders a chat request with the model's template; the template's own refusals and render
// failures are 400s.
chat::RenderedPrompt render_chat(const ServerState& st, const chat::ChatRequest& chat);

// A chat generation: rendered, submitted, and the options of the output parser that reads it.
struct ChatJob {
  std::shared_ptr<Job> job;
  ChatOutputOptions output;
};
ChatJob submit_chat(ServerState& st, const CompletionRequest& r);

}  // namespace clover::server
