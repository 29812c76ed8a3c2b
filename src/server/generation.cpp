#include "server/generation.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string_view>

#include "chat/jinja/error.h"
#include "server/client_socket.h"
#include "server/response.h"
#include "server/thinking_budget.h"

namespace clover::server {

namespace {

using namespace std::chrono_literals;

// nginx's status for "the client closed the connection before the answer" (counted in /metrics;
// nobody receives it).
constexpr int kClientClosedRequest = 499;

// Sent once when a waiting client's input ends: an interim response every HTTP/1.1 client skips
// (RFC 9110, 15.2), so that a client that closed answers with a reset.
constexpr std::string_view kInterimProbe = "HTTP/1.1 102 Processing\r\n\r\n";

// Per-stream state, owned by the content provider.
struct Stream {
  Stream(const httplib::Request& req, std::shared_ptr<Job> j, std::unique_ptr<StreamWriter> w)
      : client(req), job(std::move(j)), writer(std::move(w)) {}
  // Watched as well as the writes: tokens without text (end tokens under ignore_eos, a partial
  // UTF-8 sequence) write nothing, and a client that left would not be noticed until the end.
  ClientWatch client;
  std::shared_ptr<Job> job;
  std::unique_ptr<StreamWriter> writer;
  uint64_t events_taken = 0;
  bool started = false;
};

void write_or_cancel(Stream& s, httplib::DataSink& sink, const std::string& data, bool& ok) {
  if (!ok || data.empty()) return;
  if (!sink.write(data.data(), data.size())) {
    ok = false;
    s.job->cancel = true;  // the client went away: stop generating now
  }
}

// One call of httplib's chunked content provider: waits briefly for events and writes them.
bool stream_step(Stream& s, httplib::DataSink& sink) {
  bool ok = true;
  if (!s.started) {
    write_or_cancel(s, sink, s.writer->start(*s.job), ok);
    s.started = true;
  }
  // An SSE comment as the probe: clients skip lines that start with ':'.
  if (s.client.gone([&sink](const ClientSocket&) { return sink.write(": ping\n\n", 8); })) {
    s.job->cancel = true;
    return false;
  }
  std::vector<Event> evs;
  std::vector<Job::Pass> passes;
  const bool alive = s.job->take(evs, 100ms, s.writer->wants_passes() ? &passes : nullptr);
  size_t next_pass = 0;
  // Each pass goes out before the text it committed (the events pushed after it).
  auto send_passes = [&](uint64_t before_event) {
    for (; next_pass < passes.size() && passes[next_pass].before <= before_event; ++next_pass)
      write_or_cancel(s, sink, s.writer->pass(passes[next_pass].block), ok);
  };
  const Event* last = nullptr;
  for (const auto& ev : evs) {
    send_passes(s.events_taken++);
    write_or_cancel(s, sink, s.writer->event(ev), ok);
    if (ev.finish != FinishReason::None) last = &ev;
  }
  send_passes(UINT64_MAX);
  if (!ok) return false;
  if (last) {
    write_or_cancel(s, sink, s.writer->finish(*last, *s.job), ok);
    if (ok) sink.done();
    return ok;
  }
  if (!alive) {
    // The job ended without a final event: it failed after the stream started. The error goes
    // in-band and the stream closes without the API's end marker.
    const auto err = s.job->error();
    write_or_cancel(s, sink, s.writer->fail(err ? *err : server_error("generation ended unexpectedly")), ok);
    if (ok) sink.done();
    return ok;
  }
  return true;
}

// A prompt of B bytes has at least B / (the longest token's bytes) tokens: a prompt that cannot
// fit is refused before the tokeniser spends time and memory on it (50 MB took 9-11 s and 1.33 GB).
void check_prompt_size(const ServerState& st, size_t bytes) {
  if (st.max_token_bytes == 0) return;
  const int64_t at_least = static_cast<int64_t>((bytes + st.max_token_bytes - 1) / st.max_token_bytes);
  const int64_t n_ctx = st.scheduler->n_ctx();
  if (at_least < n_ctx) return;
  throw ApiError(400, "exceed_context_size_error",
                 "the request exceeds the available context size: the prompt has " + std::to_string(bytes) +
                     " bytes, so at least " + std::to_string(at_least) + " tokens, and the context holds " +
                     std::to_string(n_ctx) + " (at least one token must be left to generate)",
                 json{{"n_prompt_tokens", at_least}, {"n_ctx", n_ctx}});
}

// The bytes of every string in a value (the messages' text, which the prompt holds): counted
// before rendering, which costs seconds for a message of megabytes.
size_t string_bytes(const json& v) {
  size_t n = 0;
  std::vector<const json*> todo{&v};
  while (!todo.empty()) {
    const json* x = todo.back();
    todo.pop_back();
    if (x->is_string()) n += x->get_ref<const std::string&>().size();
    else if (x->is_structured())
      for (const auto& y : *x) todo.push_back(&y);
  }
  return n;
}

}  // namespace

std::optional<Collected> collect(Job& job, const httplib::Request& req, httplib::Response& res,
                                 const std::function<void(const Event&)>& each) {
  Collected c;
  ClientWatch client(req);
  std::vector<Event> evs;
  while (job.take(evs, 100ms)) {
    if (client.gone([](const ClientSocket& s) { return s.send_raw(kInterimProbe); })) {
      job.cancel = true;
      res.status = kClientClosedRequest;
      return std::nullopt;
    }
    for (auto& ev : evs) {
      if (each) each(ev);
      c.text += ev.text;
      c.tokens.insert(c.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
      if (ev.finish != FinishReason::None) c.last = ev;
    }
    evs.clear();
  }
  if (auto err = job.error()) throw *err;
  return c;
}

void start_stream(const httplib::Request& req, httplib::Response& res, std::shared_ptr<Job> job,
                  std::unique_ptr<StreamWriter> writer) {
  // Errors before anything was generated (context overflow, an unsupported mode) are plain JSON
  // responses with their status, not SSE.
  if (auto err = job->wait_started()) throw *err;
  auto s = std::make_shared<Stream>(req, std::move(job), std::move(writer));
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [s](size_t, httplib::DataSink& sink) {
        try {
          return stream_step(*s, sink);
        } catch (const std::exception& e) {  // a server bug: end this stream, keep the server
          std::fprintf(stderr, "error: stream failed: %s\n", e.what());
          s->job->cancel = true;
          return false;
        }
      },
      // A stream that ended with its end marker is not cancelled: the job may not have recorded
      // its end yet, and a cancel flag set now would count the finished generation as cancelled.
      [s](bool success) {
        if (!success) s->job->cancel = true;
      });
}

std::shared_ptr<Job> submit(ServerState& st, const CompletionRequest& r, std::string prompt_text,
                            std::vector<chat::TextSpan> literal, size_t history_chars,
                            bool thinking_open) {
  if (r.prompt_tokens.empty()) check_prompt_size(st, prompt_text.size());
  JobInput in;
  in.history_chars = history_chars;
  in.prompt_text = std::move(prompt_text);
  in.literal = std::move(literal);
  in.prompt_tokens = r.prompt_tokens;
  in.options = r.gen;
  in.max_tokens_given = r.max_tokens_given;
  in.pass_events = r.pass_events;
  in.thinking_open = thinking_open;
  in.reasoning_budget = r.reasoning_budget;
  in.reasoning_end = ThinkingBudget::closing_text(st.opt.reasoning_budget_message);
  return st.scheduler->submit(std::move(in));
}

json job_usage(const Job& job, const GenerateStats& s) {
  json u = usage_json(s, job.prompt_tokens());
  if (job.input.thinking_open) u["completion_tokens_details"] = {{"reasoning_tokens", job.reasoning_tokens.load()}};
  return u;
}

chat::RenderedPrompt render_chat(const ServerState& st, const chat::ChatRequest& chat) {
  try {
    return st.chat_template->apply(chat);
  } catch (const chat::jinja::TemplateError& e) {
    throw bad_request(std::string(e.raised ? "the chat template rejected the conversation: " : "chat template error: ") +
                      (e.raised ? e.message : std::string(e.what())));
  } catch (const std::exception& e) {
    throw bad_request(std::string("cannot render the conversation with the chat template: ") + e.what());
  }
}

ChatJob submit_chat(ServerState& st, const CompletionRequest& r) {
  check_prompt_size(st, string_bytes(r.chat.messages));
  chat::RenderedPrompt rp = render_chat(st, r.chat);

  ChatJob cj;
  cj.output.parse = st.opt.parse_reasoning;
  cj.output.parallel_tool_calls = r.parallel_tool_calls;
  cj.output.parser.thinking_open = rp.thinking_open;
  cj.output.parser.tools = r.chat.tools;

  const size_t history_chars =
      std::string_view(rp.prompt).ends_with(rp.generation_prompt) ? rp.prompt.size() - rp.generation_prompt.size() : 0;
  cj.job = submit(st, r, std::move(rp.prompt), std::move(rp.literal), history_chars, rp.thinking_open);
  return cj;
}

}  // namespace clover::server
