#include "server/messages_api.h"

#include "server/generation.h"
#include "server/handlers.h"
#include "server/json_fields.h"
#include "server/response.h"

namespace clover::server {

namespace {

const std::string& block_type(const json& b, const std::string& f) {
  if (!b.is_object()) throw wrong_type(f, "an object", b);
  return get_string(b, "type", f);
}

ApiError unsupported_block(const std::string& type, const std::string& f) {
  return bad_request("'" + f + "': content blocks of type '" + type + "' are not supported (the model reads text only)", f + ".type");
}

// A string, or text blocks (system prompts, tool results).
std::string text_of(const json& c, const std::string& f) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw wrong_type(f, "a string or an array of text blocks", c);
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string bf = f + "[" + std::to_string(i) + "]";
    const std::string& type = block_type(c[i], bf);
    if (type != "text") throw unsupported_block(type, bf);
    if (!text.empty()) text += "\n";
    text += get_string(c[i], "text", bf);
  }
  return text;
}

// A user turn: text blocks -> user messages, each tool_result -> a tool message, in order.
void user_turn(const json& content, const std::string& f, json& msgs) {
  if (content.is_string()) {
    msgs.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  std::string text;
  auto flush = [&] {
    if (!text.empty()) msgs.push_back({{"role", "user"}, {"content", std::move(text)}});
    text.clear();
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bf = f + "[" + std::to_string(i) + "]";
    const json& b = content[i];
    const std::string& type = block_type(b, bf);
    if (type == "text") {
      if (!text.empty()) text += "\n";
      text += get_string(b, "text", bf);
    } else if (type == "tool_result") {
      flush();
      const std::string& id = get_string(b, "tool_use_id", bf);
      msgs.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", present(b, "content") ? text_of(b["content"], bf + ".content") : ""}});
    } else {
      throw unsupported_block(type, bf);
    }
  }
  flush();
}

// An assistant turn: thinking -> reasoning_content, text -> content, tool_use -> tool_calls.
void assistant_turn(const json& content, const std::string& f, json& msgs) {
  json m = {{"role", "assistant"}, {"content", ""}};
  if (content.is_string()) {
    m["content"] = content;
    msgs.push_back(std::move(m));
    return;
  }
  std::string text, thinking;
  json calls = json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bf = f + "[" + std::to_string(i) + "]";
    const json& b = content[i];
    const std::string& type = block_type(b, bf);
    if (type == "text") {
      text += get_string(b, "text", bf);
    } else if (type == "thinking") {
      thinking += get_string(b, "thinking", bf);
    } else if (type == "redacted_thinking") {
      // Opaque to this server (it never sends one): nothing to render.
    } else if (type == "tool_use") {
      if (!present(b, "input") || !b["input"].is_object()) throw bad_request("'" + bf + ".input' must be an object", bf + ".input");
      calls.push_back({{"id", get_string(b, "id", bf)}, {"type", "function"},
                       {"function", {{"name", get_string(b, "name", bf)}, {"arguments", b["input"]}}}});
    } else {
      throw unsupported_block(type, bf);
    }
  }
  m["content"] = std::move(text);
  if (!thinking.empty()) m["reasoning_content"] = std::move(thinking);
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  msgs.push_back(std::move(m));
}

json chat_tools(const json& tools) {
  if (!tools.is_array()) throw wrong_type("tools", "an array", tools);
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string f = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) throw wrong_type(f, "an object", t);
    if (present(t, "type") && t["type"] != "custom")
      throw bad_request("'" + f + "': tools of type " + t["type"].dump() + " are not supported (only client tools with an input_schema are)",
                        f + ".type");
    if (!present(t, "input_schema") || !t["input_schema"].is_object())
      throw bad_request("'" + f + ".input_schema' must be an object", f + ".input_schema");
    json fn = {{"name", get_string(t, "name", f)}};
    if (present(t, "description")) fn["description"] = t["description"];
    fn["parameters"] = t["input_schema"];
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// {"type":"auto"|"any"|"tool"|"none", "name", "disable_parallel_tool_use"}
void apply_tool_choice(const json& tc, json& chat) {
  if (!tc.is_object()) throw wrong_type("tool_choice", "an object", tc);
  const std::string& type = get_string(tc, "type", "tool_choice");
  if (type == "auto") chat["tool_choice"] = "auto";
  else if (type == "any") chat["tool_choice"] = "required";
  else if (type == "none") chat["tool_choice"] = "none";
  else if (type == "tool") chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", get_string(tc, "name", "tool_choice")}}}};
  else throw bad_request("'tool_choice.type' must be auto, any, tool or none (got \"" + type + "\")", "tool_choice.type");
  if (present(tc, "disable_parallel_tool_use")) {
    if (!tc["disable_parallel_tool_use"].is_boolean())
      throw wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", tc["disable_parallel_tool_use"]);
    chat["parallel_tool_calls"] = !tc["disable_parallel_tool_use"].get<bool>();
  }
}

// {"type":"enabled","budget_tokens":N} | {"type":"disabled"} | {"type":"adaptive"}
void apply_thinking(const json& t, json& chat) {
  if (!t.is_object()) throw wrong_type("thinking", "an object", t);
  const std::string& type = get_string(t, "type", "thinking");
  if (type == "disabled") {
    chat["enable_thinking"] = false;
  } else if (type == "enabled" || type == "adaptive") {
    chat["enable_thinking"] = true;
    if (present(t, "budget_tokens")) {
      if (!t["budget_tokens"].is_number_integer() || t["budget_tokens"].get<int64_t>() < 0)
        throw bad_request("'thinking.budget_tokens' must be a non-negative integer", "thinking.budget_tokens");
      chat["thinking_budget_tokens"] = t["budget_tokens"];  // honoured where the server has a reasoning budget
    }
  } else {
    throw bad_request("'thinking.type' must be enabled, disabled or adaptive (got \"" + type + "\")", "thinking.type");
  }
}

constexpr const char* kPassThrough[] = {"model", "stream", "temperature", "top_p", "top_k", "clover"};

// stop_reason and stop_sequence. The engine reports a stop string and an end token alike (Stop);
// a stop string is told apart by the last token (not an end token) and found in the generated
// tokens' text just after the text that was sent.
std::pair<const char*, json> stop_of(const Event& last, bool tool_use, const std::vector<int32_t>& tokens, const std::string& text,
                                     const std::vector<std::string>& stops, const Engine& engine) {
  if (last.finish == FinishReason::Length) return {"max_tokens", nullptr};
  if (tool_use) return {"tool_use", nullptr};
  if (!stops.empty() && !tokens.empty() && !engine.is_end_token(tokens.back())) {
    const std::string raw = engine.detokenize(tokens);
    if (raw.size() >= text.size())
      for (const auto& s : stops)
        if (raw.compare(text.size(), s.size(), s) == 0) return {"stop_sequence", s};
  }
  return {"end_turn", nullptr};
}

json messages_usage(const GenerateStats& s, int prompt_tokens) {
  return {{"input_tokens", prompt_tokens - s.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", s.cached_tokens},
          {"output_tokens", s.generated_tokens}};
}

std::string frame(const json& ev) { return "event: " + ev["type"].get<std::string>() + "\ndata: " + dump(ev) + "\n\n"; }

// Anthropic's stream: message_start, ping, the blocks' events, message_delta (stop reason,
// usage), message_stop.
class MessagesWriter : public StreamWriter {
 public:
  MessagesWriter(ResponseMeta meta, std::unique_ptr<ChatOutput> chat, std::vector<std::string> stops, const Engine& engine)
      : meta_(std::move(meta)), chat_(std::move(chat)), stops_(std::move(stops)), engine_(engine) {}

  std::string start(const Job& job) override {
    json msg = {{"id", meta_.id}, {"type", "message"}, {"role", "assistant"}, {"model", meta_.model}, {"content", json::array()},
                {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", job.prompt_tokens()}, {"output_tokens", 0}}}};
    return frame({{"type", "message_start"}, {"message", std::move(msg)}}) + frame({{"type", "ping"}});
  }
  std::string event(const Event& ev) override {
    tokens_.insert(tokens_.end(), ev.tokens.begin(), ev.tokens.end());
    text_ += ev.text;
    return ev.text.empty() ? std::string() : frames(out_.push(chat_->push_events(ev.text)));
  }
  std::string finish(const Event& last, const Job& job) override {
    std::string data = frames(out_.push(chat_->finish_events()));
    data += frames(out_.finish());
    const auto [reason, seq] = stop_of(last, out_.has_tool_use(), tokens_, text_, stops_, engine_);
    json delta = {{"type", "message_delta"}, {"delta", {{"stop_reason", reason}, {"stop_sequence", seq}}},
                  {"usage", messages_usage(last.stats, job.prompt_tokens())}};
    return data + frame(delta) + frame({{"type", "message_stop"}});
  }
  std::string fail(const ApiError& e) override { return frame(anthropic_error_body(e)); }

 private:
  std::string frames(const std::vector<json>& evs) const {
    std::string data;
    for (const auto& ev : evs) data += frame(ev);
    return data;
  }
  ResponseMeta meta_;
  std::unique_ptr<ChatOutput> chat_;
  std::vector<std::string> stops_;
  const Engine& engine_;
  MessagesOutput out_;
  std::vector<int32_t> tokens_;
  std::string text_;
};

CompletionRequest parse_messages_request(const ServerState& st, const json& body, bool count_only) {
  CompletionRequest r = parse_chat_request(messages_to_chat(body, count_only), st.defaults);
  check_model(st, r.model);
  return r;
}

}  // namespace

json anthropic_error_body(const ApiError& e) {
  const char* type = "api_error";
  switch (e.status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    default: break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

json messages_to_chat(const json& body, bool count_only) {
  if (present(body, "clover") && body["clover"].is_object() && present(body["clover"], "pass_events"))
    throw bad_request("'clover.pass_events' is supported on /v1/chat/completions only", "clover.pass_events");
  json msgs = json::array();
  std::string system;
  if (present(body, "system")) system = text_of(body["system"], "system");
  if (!body.contains("messages")) throw bad_request("'messages' is required", "messages");
  const json& in = body["messages"];
  if (!in.is_array()) throw wrong_type("messages", "an array", in);
  if (in.empty()) throw bad_request("'messages' must not be empty", "messages");
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string f = "messages[" + std::to_string(i) + "]";
    if (!in[i].is_object()) throw wrong_type(f, "an object", in[i]);
    const std::string& role = get_string(in[i], "role", f);
    if (!present(in[i], "content")) throw bad_request("'" + f + ".content' is required", f + ".content");
    const json& content = in[i]["content"];
    if (!content.is_string() && !content.is_array()) throw wrong_type(f + ".content", "a string or an array of content blocks", content);
    if (role == "user") {
      user_turn(content, f + ".content", msgs);
    } else if (role == "assistant") {
      assistant_turn(content, f + ".content", msgs);
    } else if (role == "system") {
      // Claude Code sends system messages between the turns; the templates accept one system
      // turn, at the start, so their text joins the system prompt.
      if (!system.empty()) system += "\n\n";
      system += text_of(content, f + ".content");
    } else {
      throw bad_request("'" + f + ".role' must be user, assistant or system (got \"" + role + "\")", f + ".role");
    }
  }
  if (!system.empty()) msgs.insert(msgs.begin(), json{{"role", "system"}, {"content", std::move(system)}});
  if (in.back().value("role", "") == "assistant")
    throw bad_request("a final assistant message (prefilling the answer) is not supported: end with a user message", "messages");

  json chat = {{"messages", std::move(msgs)}};
  for (const char* k : kPassThrough)
    if (body.contains(k)) chat[k] = body[k];
  if (present(body, "max_tokens")) {
    const json& m = body["max_tokens"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1) throw bad_request("'max_tokens' must be a positive integer", "max_tokens");
    chat["max_tokens"] = m;
  } else if (!count_only) {
    throw bad_request("'max_tokens' is required", "max_tokens");
  }
  if (present(body, "stop_sequences")) {
    const json& s = body["stop_sequences"];
    if (!s.is_array()) throw wrong_type("stop_sequences", "an array of strings", s);
    for (const auto& x : s)
      if (!x.is_string()) throw wrong_type("stop_sequences[]", "a string", x);
    chat["stop"] = s;
  }
  if (present(body, "tools")) chat["tools"] = chat_tools(body["tools"]);
  if (present(body, "tool_choice")) apply_tool_choice(body["tool_choice"], chat);
  if (present(body, "thinking")) apply_thinking(body["thinking"], chat);
  return chat;
}

// ------------------------------------------------------------------------------ content blocks

void MessagesOutput::open(Open kind, const chat::StreamEvent& e, std::vector<json>& out) {
  close(out);
  open_ = kind;
  text_.clear();
  json block;
  if (kind == Open::Thinking) {
    block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
  } else if (kind == Open::Text) {
    block = {{"type", "text"}, {"text", ""}};
  } else {
    call_index_ = e.index;
    has_tool_use_ = true;
    block = {{"type", "tool_use"}, {"id", e.id}, {"name", e.name}, {"input", json::object()}};
  }
  out.push_back({{"type", "content_block_start"}, {"index", blocks_.size()}, {"content_block", block}});
  blocks_.push_back(std::move(block));
}

void MessagesOutput::close(std::vector<json>& out) {
  if (open_ == Open::None) return;
  json& block = blocks_.back();
  if (open_ == Open::Thinking) block["thinking"] = text_;
  else if (open_ == Open::Text) block["text"] = text_;
  else block["input"] = text_.empty() ? json::object() : json::parse(text_);  // the parser closes every call's JSON
  out.push_back({{"type", "content_block_stop"}, {"index", blocks_.size() - 1}});
  open_ = Open::None;
}

std::vector<json> MessagesOutput::push(const std::vector<chat::StreamEvent>& evs) {
  using K = chat::StreamEvent::Kind;
  std::vector<json> out;
  for (const auto& e : evs) {
    if ((e.kind == K::Reasoning || e.kind == K::Content) && e.text.empty()) continue;
    if (e.kind == K::Reasoning && open_ != Open::Thinking) open(Open::Thinking, e, out);
    if (e.kind == K::Content && open_ != Open::Text) open(Open::Text, e, out);
    if (e.kind == K::ToolCallBegin) {
      open(Open::ToolUse, e, out);
      continue;
    }
    if (e.kind == K::ToolCallArguments && (open_ != Open::ToolUse || call_index_ != e.index)) continue;  // not expected
    if (e.text.empty()) continue;
    text_ += e.text;
    json delta;
    if (e.kind == K::Reasoning) delta = {{"type", "thinking_delta"}, {"thinking", e.text}};
    else if (e.kind == K::Content) delta = {{"type", "text_delta"}, {"text", e.text}};
    else delta = {{"type", "input_json_delta"}, {"partial_json", e.text}};
    out.push_back({{"type", "content_block_delta"}, {"index", blocks_.size() - 1}, {"delta", std::move(delta)}});
  }
  return out;
}

std::vector<json> MessagesOutput::finish() {
  std::vector<json> out;
  close(out);
  return out;
}

// ---------------------------------------------------------------------------------- endpoints

void handle_messages(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const CompletionRequest r = parse_messages_request(st, parse_body(req.body), false);
  ChatJob cj = submit_chat(st, r);
  cj.output.parser.id_prefix = "toolu_";
  auto chat = std::make_unique<ChatOutput>(std::move(cj.output));
  const ResponseMeta meta = new_meta("msg_", st.model_name);
  if (r.stream) return start_stream(req, res, cj.job, std::make_unique<MessagesWriter>(meta, std::move(chat), r.gen.stop, *st.engine));
  const std::optional<Collected> c = collect(*cj.job, req, res);
  if (!c) return;
  MessagesOutput out;
  out.push(chat->push_events(c->text));
  out.push(chat->finish_events());
  out.finish();
  const auto [reason, seq] = stop_of(c->last, out.has_tool_use(), c->tokens, c->text, r.gen.stop, *st.engine);
  json m = {{"id", meta.id}, {"type", "message"}, {"role", "assistant"}, {"model", meta.model}, {"content", out.blocks()},
            {"stop_reason", reason}, {"stop_sequence", seq}, {"usage", messages_usage(c->last.stats, cj.job->prompt_tokens())},
            {"timings", timings_json(c->last.stats)}};
  res.set_content(dump(m), "application/json");
}

void handle_count_tokens(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const CompletionRequest r = parse_messages_request(st, parse_body(req.body), true);
  const chat::RenderedPrompt rp = render_chat(st, r.chat);
  const size_t n = tokenize_prompt(*st.engine, rp.prompt, rp.literal).size();
  res.set_content(dump(json{{"input_tokens", n}}), "application/json");
}

}  // namespace clover::server
