#include "server/handlers.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <vector>

#include "chat/jinja/error.h"
#include "server/chat_stream.h"
#include "server/client_socket.h"
#include "server/pass_events.h"
#include "server/response.h"
#include "server/thinking_budget.h"

namespace clover::server {

namespace {

using namespace std::chrono_literals;

// nginx's status for "the client closed the connection before the answer" (counted in /metrics;
// nobody receives it).
constexpr int kClientClosedRequest = 499;

// Collects a whole generation (non-streaming). Throws the job's error. When the client closes the
// connection meanwhile, cancels the job (its slot is free after the current pass) and returns
// with `client_gone`: there is nobody to answer.
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  Event last;
  bool client_gone = false;
};

// Sent once when a waiting client's input ends: an interim response every HTTP/1.1 client skips
// (RFC 9110, 15.2), so that a client that closed answers with a reset.
constexpr std::string_view kInterimProbe = "HTTP/1.1 102 Processing\r\n\r\n";

Collected collect(Job& job, const httplib::Request& req) {
  Collected c;
  ClientWatch client(req);
  std::vector<Event> evs;
  while (job.take(evs, 100ms)) {
    if (client.gone([](const ClientSocket& s) { return s.send_raw(kInterimProbe); })) {
      job.cancel = true;
      c.client_gone = true;
      return c;
    }
    for (auto& ev : evs) {
      c.text += ev.text;
      c.tokens.insert(c.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finish != FinishReason::None) c.last = ev;
    }
    evs.clear();
  }
  if (auto err = job.error()) throw *err;
  return c;
}

// usage, with OpenAI's completion_tokens_details.reasoning_tokens when the output started in a
// think block.
json job_usage(const Job& job, const GenerateStats& s) {
  json u = usage_json(s, job.prompt_tokens());
  if (job.input.thinking_open) u["completion_tokens_details"] = {{"reasoning_tokens", job.reasoning_tokens.load()}};
  return u;
}

// Per-stream state, owned by the content provider. A chat stream has a ChatOutput; a text
// completion stream has none.
struct Stream {
  Stream(const httplib::Request& req, std::shared_ptr<Job> j, ResponseMeta m, bool usage, std::unique_ptr<ChatOutput> o)
      : client(req), job(std::move(j)), meta(std::move(m)), include_usage(usage), out(std::move(o)) {}
  // Watched as well as the writes: tokens without text (end tokens under ignore_eos, a partial
  // UTF-8 sequence) write nothing, and a client that left would not be noticed until the end.
  ClientWatch client;
  std::shared_ptr<Job> job;
  ResponseMeta meta;
  bool include_usage = false;
  std::unique_ptr<ChatOutput> out;  // chat only
  std::unique_ptr<PassEncoder> passes;  // chat with pass_events only
  uint64_t events_taken = 0;
  bool sent_role = false;
  bool chat() const { return out != nullptr; }
};

void write_or_cancel(Stream& s, httplib::DataSink& sink, const std::string& data, bool& ok) {
  if (!ok) return;
  if (!sink.write(data.data(), data.size())) {
    ok = false;
    s.job->cancel = true;  // the client went away: stop generating now
  }
}

// One call of httplib's chunked content provider: waits briefly for events and writes them.
bool stream_step(Stream& s, httplib::DataSink& sink) {
  bool ok = true;
  if (s.chat() && !s.sent_role) {
    write_or_cancel(s, sink, sse(chat_chunk(s.meta, {{"role", "assistant"}, {"content", nullptr}})), ok);
    s.sent_role = true;
  }
  // An SSE comment as the probe: clients skip lines that start with ':'.
  if (s.client.gone([&sink](const ClientSocket&) { return sink.write(": ping\n\n", 8); })) {
    s.job->cancel = true;
    return false;
  }
  std::vector<Event> evs;
  std::vector<Job::Pass> passes;
  const bool alive = s.job->take(evs, 100ms, s.passes ? &passes : nullptr);
  size_t next_pass = 0;
  // Each pass goes out before the text it committed (the events pushed after it).
  auto send_passes = [&](uint64_t before_event) {
    for (; next_pass < passes.size() && passes[next_pass].before <= before_event; ++next_pass)
      write_or_cancel(s, sink, sse(pass_chunk(s.meta, s.passes->encode(passes[next_pass].block))), ok);
  };
  const Event* last = nullptr;
  for (const auto& ev : evs) {
    send_passes(s.events_taken++);
    if (!ev.text.empty()) {
      if (s.chat()) {
        for (auto& d : s.out->push(ev.text)) write_or_cancel(s, sink, sse(chat_chunk(s.meta, std::move(d))), ok);
      } else {
        write_or_cancel(s, sink, sse(text_chunk(s.meta, ev.text)), ok);
      }
    }
    if (ev.finish != FinishReason::None) last = &ev;
  }
  send_passes(UINT64_MAX);
  if (!ok) return false;
  if (last) {
    const GenerateStats& st = last->stats;
    json usage = job_usage(*s.job, st);
    if (s.chat()) {
      for (auto& d : s.out->finish()) write_or_cancel(s, sink, sse(chat_chunk(s.meta, std::move(d))), ok);
      json fin = chat_chunk(s.meta, json::object(), finish_reason(last->finish, s.out->has_tool_calls()));
      fin["timings"] = timings_json(st);
      write_or_cancel(s, sink, sse(fin), ok);
      if (s.include_usage) write_or_cancel(s, sink, sse(usage_chunk(s.meta, "chat.completion.chunk", usage)), ok);
    } else {
      json fin = text_chunk(s.meta, "", finish_reason(last->finish, false));
      fin["timings"] = timings_json(st);
      write_or_cancel(s, sink, sse(fin), ok);
      if (s.include_usage) write_or_cancel(s, sink, sse(usage_chunk(s.meta, "text_completion", usage)), ok);
    }
    write_or_cancel(s, sink, kSseDone, ok);
    if (ok) sink.done();
    return ok;
  }
  if (!alive) {
    // The job ended without a final event: it failed after the stream started. The error goes
    // in-band and the stream closes without [DONE].
    const auto err = s.job->error();
    write_or_cancel(s, sink, sse((err ? *err : server_error("generation ended unexpectedly")).body()), ok);
    if (ok) sink.done();
    return ok;
  }
  return true;
}

void start_stream(httplib::Response& res, std::shared_ptr<Stream> s) {
  // Errors before anything was generated (context overflow, an unsupported mode) are plain JSON
  // responses with their status, not SSE.
  if (auto err = s->job->wait_started()) throw *err;
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
      // A stream that ended with [DONE] is not cancelled: the job may not have recorded its end
      // yet, and a cancel flag set now would count the finished generation as cancelled.
      [s](bool success) {
        if (!success) s->job->cancel = true;
      });
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

std::shared_ptr<Job> submit(ServerState& st, const CompletionRequest& r, std::string prompt_text, size_t history_chars = 0,
                            bool thinking_open = false) {
  if (r.prompt_tokens.empty()) check_prompt_size(st, prompt_text.size());
  if (r.gen.mode != DecodeMode::AR && !st.engine->info().device_denoises)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("decoding mode {} needs denoising passes, which the {} backend does not run yet (issue #20): "
                               "use mode ar, or serve with --device cpu",
                               r.gen.mode == DecodeMode::Spec ? "spec" : "diffusion", st.engine->info().device),
                   json{{"param", "clover.mode"}});
  JobInput in;
  in.history_chars = history_chars;
  in.prompt_text = std::move(prompt_text);
  in.prompt_tokens = r.prompt_tokens;
  in.options = r.gen;
  in.max_tokens_given = r.max_tokens_given;
  in.pass_events = r.pass_events;
  in.thinking_open = thinking_open;
  in.reasoning_budget = r.reasoning_budget;
  in.reasoning_end = ThinkingBudget::closing_text(st.opt.reasoning_budget_message);
  return st.scheduler->submit(std::move(in));
}

// Answers a submitted job: as a stream (returns nullopt), or waits for the whole generation and
// returns it; a client that left meanwhile gets status 499 (nullopt: there is nobody to answer).
// `chat` is the chat layer of a chat response (moved into the stream; null for /completions), and
// `passes` the pass-event encoder of a chat stream that asked for them (else null).
std::optional<Collected> stream_or_collect(const httplib::Request& req, httplib::Response& res, const std::shared_ptr<Job>& job,
                                           const ResponseMeta& meta, const CompletionRequest& r, std::unique_ptr<ChatOutput>& chat,
                                           std::unique_ptr<PassEncoder> passes = nullptr) {
  if (r.stream) {
    auto s = std::make_shared<Stream>(req, job, meta, r.include_usage, std::move(chat));
    s->passes = std::move(passes);
    start_stream(res, std::move(s));
    return std::nullopt;
  }
  Collected c = collect(*job, req);
  if (c.client_gone) {
    res.status = kClientClosedRequest;
    return std::nullopt;
  }
  return c;
}

}  // namespace

chat::RenderedPrompt render_chat(const ServerState& st, const chat::ChatRequest& req) {
  try {
    return st.chat_template->apply(req);
  } catch (const chat::jinja::TemplateError& e) {
    throw bad_request(std::string(e.raised ? "the chat template rejected the conversation: " : "chat template error: ") +
                      (e.raised ? e.message : std::string(e.what())));
  } catch (const std::exception& e) {
    throw bad_request(std::string("cannot render the conversation with the chat template: ") + e.what());
  }
}

void check_model(const ServerState& st, const std::string& requested) {
  if (requested.empty() || requested == st.model_name) return;
  for (const auto& a : st.opt.aliases)
    if (requested == a) return;
  const std::filesystem::path p(st.opt.model_path);
  if (requested == st.opt.model_path || requested == p.filename().string() || requested == p.stem().string()) return;
  throw ApiError(404, "not_found_error", "the model '" + requested + "' does not exist; this server serves '" + st.model_name + "'",
                 json{{"param", "model"}});
}

void handle_chat_completions(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  CompletionRequest r = parse_chat_request(body, st.defaults);
  r.pass_events = parse_pass_events(body, r.stream);
  check_model(st, r.model);

  check_prompt_size(st, string_bytes(r.chat.messages));
  chat::RenderedPrompt rp = render_chat(st, r.chat);

  ChatOutputOptions oo;
  oo.parse = st.opt.parse_reasoning;
  oo.parallel_tool_calls = r.parallel_tool_calls;
  oo.parser.thinking_open = rp.thinking_open;
  oo.parser.tools = r.chat.tools;

  const size_t history_chars =
      std::string_view(rp.prompt).ends_with(rp.generation_prompt) ? rp.prompt.size() - rp.generation_prompt.size() : 0;
  auto job = submit(st, r, std::move(rp.prompt), history_chars, rp.thinking_open);
  const ResponseMeta meta = new_meta("chatcmpl-", st.model_name);
  auto out = std::make_unique<ChatOutput>(std::move(oo));
  auto passes = r.pass_events ? std::make_unique<PassEncoder>(*st.engine, r.gen.mode) : nullptr;
  const std::optional<Collected> c = stream_or_collect(req, res, job, meta, r, out, std::move(passes));
  if (!c) return;
  out->push(c->text);
  out->finish();
  const GenerateStats& s = c->last.stats;
  json body_out = chat_completion(meta, out->message(), finish_reason(c->last.finish, out->has_tool_calls()), job_usage(*job, s),
                                  timings_json(s));
  if (r.return_tokens) body_out["choices"][0]["tokens"] = c->tokens;
  res.set_content(dump(body_out), "application/json");
}

void handle_completions(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  CompletionRequest r = parse_completion_request(body, st.defaults, st.engine->info().n_vocab);
  check_model(st, r.model);
  auto job = submit(st, r, r.prompt);
  const ResponseMeta meta = new_meta("cmpl-", st.model_name);
  std::unique_ptr<ChatOutput> no_chat;
  const std::optional<Collected> c = stream_or_collect(req, res, job, meta, r, no_chat);
  if (!c) return;
  const GenerateStats& s = c->last.stats;
  json out = text_completion(meta, c->text, finish_reason(c->last.finish, false), job_usage(*job, s),
                             timings_json(s));
  if (r.return_tokens) out["choices"][0]["tokens"] = c->tokens;
  res.set_content(dump(out), "application/json");
}

}  // namespace clover::server
