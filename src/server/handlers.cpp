#include "server/handlers.h"

#include <filesystem>

#include "server/chat_stream.h"
#include "server/generation.h"
#include "server/logprobs.h"
#include "server/pass_events.h"
#include "server/response.h"

namespace clover::server {

namespace {

// A chat completion stream: the role chunk, the chat layer's deltas as chunks, the finish chunk
// with timings, the usage chunk when asked, [DONE]; with pass_events, a chunk per denoising pass.
// With logprobs (engine set), a chunk's logprobs.content holds the entries of the tokens whose text
// it carries; tokens whose text the chat layer holds back go with the next chunk sent.
class ChatChunkWriter : public StreamWriter {
 public:
  ChatChunkWriter(ResponseMeta meta, bool include_usage, std::unique_ptr<ChatOutput> out, std::unique_ptr<PassEncoder> passes,
                  const Engine* logprobs)
      : meta_(std::move(meta)),
        include_usage_(include_usage),
        out_(std::move(out)),
        passes_(std::move(passes)),
        logprobs_(logprobs) {}

  std::string start(const Job&) override { return sse(chat_chunk(meta_, {{"role", "assistant"}, {"content", nullptr}})); }
  std::string event(const Event& ev) override {
    held_.insert(held_.end(), ev.logprobs.begin(), ev.logprobs.end());
    return ev.text.empty() ? std::string() : chunks(out_->push(ev.text));
  }
  std::string finish(const Event& last, const Job& job) override {
    std::string data = chunks(out_->finish());
    json fin = chat_chunk(meta_, json::object(), finish_reason(last.finish, out_->has_tool_calls()));
    if (logprobs_) fin["choices"][0]["logprobs"] = {{"content", chat_logprobs_content(*logprobs_, held_)}};
    fin["timings"] = timings_json(last.stats);
    data += sse(fin);
    if (include_usage_) data += sse(usage_chunk(meta_, "chat.completion.chunk", job_usage(job, last.stats)));
    return data + kSseDone;
  }
  std::string fail(const ApiError& e) override { return sse(e.body()); }
  bool wants_passes() const override { return passes_ != nullptr; }
  std::string pass(const BlockEvent& b) override { return sse(pass_chunk(meta_, passes_->encode(b))); }

 private:
  std::string chunks(std::vector<json> deltas) {
    std::string data;
    for (auto& d : deltas) {
      json c = chat_chunk(meta_, std::move(d));
      if (logprobs_) {
        c["choices"][0]["logprobs"] = {{"content", chat_logprobs_content(*logprobs_, held_)}};
        held_.clear();
      }
      data += sse(c);
    }
    return data;
  }
  ResponseMeta meta_;
  bool include_usage_;
  std::unique_ptr<ChatOutput> out_;
  std::unique_ptr<PassEncoder> passes_;  // null without pass_events
  const Engine* logprobs_;               // null without logprobs
  std::vector<TokenLogprobs> held_;      // entries not sent yet
};

// A text completion stream: a chunk per event's text, the finish chunk with timings, the usage
// chunk when asked, [DONE]. With logprobs (engine set), each chunk carries its tokens' entries;
// tokens without text yet (part of a UTF-8 character) go with the next chunk.
class TextChunkWriter : public StreamWriter {
 public:
  TextChunkWriter(ResponseMeta meta, bool include_usage, const Engine* logprobs)
      : meta_(std::move(meta)), include_usage_(include_usage), logprobs_(logprobs) {}

  std::string start(const Job&) override { return {}; }
  std::string event(const Event& ev) override {
    held_.insert(held_.end(), ev.logprobs.begin(), ev.logprobs.end());
    return ev.text.empty() ? std::string() : sse(with_logprobs(text_chunk(meta_, ev.text)));
  }
  std::string finish(const Event& last, const Job& job) override {
    json fin = with_logprobs(text_chunk(meta_, "", finish_reason(last.finish, false)));
    fin["timings"] = timings_json(last.stats);
    std::string data = sse(fin);
    if (include_usage_) data += sse(usage_chunk(meta_, "text_completion", job_usage(job, last.stats)));
    return data + kSseDone;
  }
  std::string fail(const ApiError& e) override { return sse(e.body()); }

 private:
  json with_logprobs(json chunk) {
    if (logprobs_) {
      chunk["choices"][0]["logprobs"] = completion_logprobs(*logprobs_, held_, text_offset_);
      held_.clear();
    }
    return chunk;
  }
  ResponseMeta meta_;
  bool include_usage_;
  const Engine* logprobs_;           // null without logprobs
  std::vector<TokenLogprobs> held_;  // entries not sent yet
  size_t text_offset_ = 0;
};

}  // namespace

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

  ChatJob cj = submit_chat(st, r);
  const ResponseMeta meta = new_meta("chatcmpl-", st.model_name);
  auto out = std::make_unique<ChatOutput>(std::move(cj.output));
  if (r.stream) {
    auto passes = r.pass_events ? std::make_unique<PassEncoder>(*st.engine, r.gen.mode) : nullptr;
    return start_stream(req, res, cj.job, std::make_unique<ChatChunkWriter>(meta, r.include_usage, std::move(out), std::move(passes),
                                                                     r.gen.logprobs >= 0 ? st.engine.get() : nullptr));
  }
  const std::optional<Collected> c = collect(*cj.job, req, res);
  if (!c) return;
  out->push(c->text);
  out->finish();
  const GenerateStats& s = c->last.stats;
  json body_out = chat_completion(meta, out->message(), finish_reason(c->last.finish, out->has_tool_calls()),
                                  job_usage(*cj.job, s), timings_json(s));
  if (r.gen.logprobs >= 0) body_out["choices"][0]["logprobs"] = {{"content", chat_logprobs_content(*st.engine, c->logprobs)}};
  if (r.return_tokens) body_out["choices"][0]["tokens"] = c->tokens;
  res.set_content(dump(body_out), "application/json");
}

void handle_completions(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  CompletionRequest r = parse_completion_request(body, st.defaults, st.engine->info().n_vocab);
  check_model(st, r.model);
  auto job = submit(st, r, r.prompt);
  const ResponseMeta meta = new_meta("cmpl-", st.model_name);
  if (r.stream) return start_stream(req, res, job, std::make_unique<TextChunkWriter>(meta, r.include_usage, r.gen.logprobs >= 0 ? st.engine.get() : nullptr));
  const std::optional<Collected> c = collect(*job, req, res);
  if (!c) return;
  const GenerateStats& s = c->last.stats;
  json out = text_completion(meta, c->text, finish_reason(c->last.finish, false), job_usage(*job, s), timings_json(s));
  size_t offset = 0;
  if (r.gen.logprobs >= 0) out["choices"][0]["logprobs"] = completion_logprobs(*st.engine, c->logprobs, offset);
  if (r.return_tokens) out["choices"][0]["tokens"] = c->tokens;
  res.set_content(dump(out), "application/json");
}

}  // namespace clover::server
