#include "server/responses_api.h"

#include <chrono>
#include <cstdint>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/handlers.h"
#include "server/json_fields.h"
#include "server/logprobs.h"
#include "server/response.h"

namespace clover::server {

namespace {

// The text of a message's content: a string, or parts of the text types (input_text, output_text,
// refusal). Files, images and audio are refused: the model reads text only.
std::string content_text(const json& c, const std::string& f) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw wrong_type(f, "a string or an array of content parts", c);
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string pf = f + "[" + std::to_string(i) + "]";
    const json& p = c[i];
    if (!p.is_object() || !present(p, "type") || !p["type"].is_string()) throw bad_request("'" + pf + ".type' must be a string", pf);
    const std::string& type = p["type"].get_ref<const std::string&>();
    if (type == "input_text" || type == "output_text" || type == "text") text += get_string(p, "text", pf);
    else if (type == "refusal") text += get_string(p, "refusal", pf);
    else
      throw bad_request("content parts of type '" + type + "' are not supported (the model reads text only; send input_text)", pf);
  }
  return text;
}

// The reasoning text of a reasoning input item: its reasoning_text content, else its summary.
std::string reasoning_text(const json& item, const std::string& f) {
  std::string text;
  for (const char* key : {"content", "summary"}) {
    if (!present(item, key)) continue;
    const json& parts = item[key];
    if (!parts.is_array()) throw wrong_type(f + "." + key, "an array", parts);
    for (size_t i = 0; i < parts.size(); ++i)
      if (parts[i].is_object() && present(parts[i], "text")) {
        if (!text.empty()) text += "\n";
        text += get_string(parts[i], "text", f + "." + key + "[" + std::to_string(i) + "]");
      }
    if (!text.empty()) break;
  }
  return text;
}

// input items -> chat messages. Leading system and developer messages (and `instructions`) become
// the one system message the templates accept; function_call items join the assistant turn before
// them; a reasoning item goes with the assistant turn after it.
json input_messages(const json& body) {
  std::string system;
  if (present(body, "instructions")) {
    if (!body["instructions"].is_string()) throw wrong_type("instructions", "a string", body["instructions"]);
    system = body["instructions"].get<std::string>();
  }
  json msgs = json::array();
  if (!body.contains("input")) throw bad_request("'input' is required", "input");
  const json& input = body["input"];
  std::string reasoning;  // from a reasoning item, for the next assistant turn
  auto assistant_turn = [&]() -> json& {
    if (msgs.empty() || msgs.back()["role"] != "assistant" || !reasoning.empty()) {
      json m = {{"role", "assistant"}, {"content", ""}};
      if (!reasoning.empty()) m["reasoning_content"] = std::move(reasoning);
      reasoning.clear();
      msgs.push_back(std::move(m));
    }
    return msgs.back();
  };
  if (input.is_string()) {
    msgs.push_back({{"role", "user"}, {"content", input}});
  } else if (input.is_array()) {
    for (size_t i = 0; i < input.size(); ++i) {
      const std::string f = "input[" + std::to_string(i) + "]";
      const json& it = input[i];
      if (!it.is_object()) throw wrong_type(f, "an object", it);
      std::string type = "message";  // an "easy input message" has a role and no type
      if (present(it, "type")) {
        if (!it["type"].is_string()) throw wrong_type(f + ".type", "a string", it["type"]);
        type = it["type"].get<std::string>();
      }
      if (type == "message") {
        const std::string& role = get_string(it, "role", f);
        if (!present(it, "content")) throw bad_request("'" + f + ".content' is required", f + ".content");
        std::string text = content_text(it["content"], f + ".content");
        if (role == "system" || role == "developer") {
          if (msgs.empty()) {
            if (!system.empty()) system += "\n\n";
            system += text;
          } else {
            msgs.push_back({{"role", "system"}, {"content", std::move(text)}});
          }
        } else if (role == "user") {
          reasoning.clear();  // a reasoning item belongs to the assistant turn right after it
          msgs.push_back({{"role", "user"}, {"content", std::move(text)}});
        } else if (role == "assistant") {
          json m = {{"role", "assistant"}, {"content", std::move(text)}};
          if (!reasoning.empty()) m["reasoning_content"] = std::move(reasoning);
          reasoning.clear();
          msgs.push_back(std::move(m));
        } else {
          throw bad_request("'" + f + ".role' must be user, assistant, system or developer (got \"" + role + "\")", f + ".role");
        }
      } else if (type == "function_call") {
        const std::string& call_id = get_string(it, "call_id", f);
        const std::string& name = get_string(it, "name", f);
        const std::string& args = get_string(it, "arguments", f);
        json& m = assistant_turn();
        if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
        m["tool_calls"].push_back({{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}});
      } else if (type == "function_call_output") {
        const std::string& call_id = get_string(it, "call_id", f);
        if (!present(it, "output")) throw bad_request("'" + f + ".output' is required", f + ".output");
        msgs.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", content_text(it["output"], f + ".output")}});
      } else if (type == "reasoning") {
        reasoning = reasoning_text(it, f);
      } else if (type == "item_reference") {
        throw bad_request("'" + f + "': item references are not supported: this server keeps no state; send the items themselves", f);
      } else {
        throw bad_request("'" + f + "': input items of type '" + type +
                              "' are not supported (message, function_call, function_call_output and reasoning are)",
                          f + ".type");
      }
    }
  } else {
    throw wrong_type("input", "a string or an array of input items", input);
  }
  if (!system.empty()) msgs.insert(msgs.begin(), json{{"role", "system"}, {"content", std::move(system)}});
  if (msgs.empty()) throw bad_request("'input' must not be empty", "input");
  return msgs;
}

// Responses function tools ({"type":"function","name","description","parameters"}) -> chat tools.
// The other kinds (hosted tools such as web_search, namespaces of sub-agent tools, custom
// free-form tools), which agents like Codex send with every request, are not offered to the model:
// it can only call functions. A tool_choice that forces one of them is refused.
json chat_tools(const json& tools) {
  if (!tools.is_array()) throw wrong_type("tools", "an array", tools);
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string f = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) throw wrong_type(f, "an object", t);
    if (get_string(t, "type", f) != "function") continue;
    json fn = {{"name", get_string(t, "name", f)}};
    if (present(t, "description")) fn["description"] = t["description"];
    fn["parameters"] = present(t, "parameters") ? t["parameters"] : json{{"type", "object"}, {"properties", json::object()}};
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json chat_tool_choice(const json& tc) {
  if (tc.is_string()) return tc;  // none / auto / required: checked by the chat parser
  if (!tc.is_object()) throw wrong_type("tool_choice", "a string or an object", tc);
  const std::string& type = get_string(tc, "type", "tool_choice");
  if (type != "function")
    throw bad_request("'tool_choice' of type '" + type + "' is not supported (none, auto, required or a function)", "tool_choice");
  return {{"type", "function"}, {"function", {{"name", get_string(tc, "name", "tool_choice")}}}};
}

// Effort none or minimal turns thinking off; low, medium and high leave it on.
void apply_reasoning(const json& r, json& chat) {
  if (!r.is_object()) throw wrong_type("reasoning", "an object", r);
  if (!present(r, "effort")) return;
  if (!r["effort"].is_string()) throw wrong_type("reasoning.effort", "a string", r["effort"]);
  const std::string& e = r["effort"].get_ref<const std::string&>();
  if (e == "none" || e == "minimal") chat["enable_thinking"] = false;
  else if (e == "low" || e == "medium" || e == "high" || e == "xhigh") chat["enable_thinking"] = true;
  else throw bad_request("'reasoning.effort' must be none, minimal, low, medium or high (got \"" + e + "\")", "reasoning.effort");
}

// Log-probabilities: asked for by include "message.output_text.logprobs" (OpenAI's switch) or by
// top_logprobs > 0 alone (which OpenAI accepts and answers with none: here it gives them rather
// than doing nothing). Other include values (reasoning.encrypted_content, which Codex sends) ask
// for what this server does not keep, and change nothing.
void apply_logprobs(const json& body, json& chat) {
  bool want = false;
  if (present(body, "include")) {
    const json& inc = body["include"];
    if (!inc.is_array()) throw wrong_type("include", "an array of strings", inc);
    for (const json& v : inc) {
      if (!v.is_string()) throw wrong_type("include[]", "a string", v);
      if (v == "message.output_text.logprobs") want = true;
    }
  }
  int64_t top = 0;
  get_int(body, "top_logprobs", top, 0, 20);
  if (want || top > 0) {
    chat["logprobs"] = true;
    chat["top_logprobs"] = top;
  }
}

// The sampling fields the Responses API lacks, accepted as llama-server accepts them, and the
// decoding-mode extension.
constexpr const char* kPassThrough[] = {"model",          "stream",           "temperature",      "top_p",
                                        "parallel_tool_calls", "top_k",       "min_p",            "presence_penalty",
                                        "frequency_penalty", "repeat_penalty", "repeat_last_n",   "seed",
                                        "ignore_eos",     "clover"};

}  // namespace

json responses_to_chat(const json& body) {
  if (present(body, "previous_response_id"))
    throw bad_request("'previous_response_id' is not supported: this server keeps no state; send the whole conversation in 'input'",
                      "previous_response_id");
  if (present(body, "conversation"))
    throw bad_request("'conversation' is not supported: this server keeps no state; send the whole conversation in 'input'",
                      "conversation");
  if (present(body, "prompt")) throw bad_request("stored prompts ('prompt') are not supported", "prompt");
  if (present(body, "background") && body["background"] != false)
    throw bad_request("'background' is not supported: responses are answered while the request waits", "background");
  if (present(body, "clover") && body["clover"].is_object() && present(body["clover"], "pass_events"))
    throw bad_request("'clover.pass_events' is supported on /v1/chat/completions only", "clover.pass_events");
  if (present(body, "text")) {
    const json& t = body["text"];
    if (!t.is_object()) throw wrong_type("text", "an object", t);
    if (present(t, "format") && !(t["format"].is_object() && t["format"].value("type", "") == "text"))
      throw bad_request("'text.format' other than {\"type\": \"text\"} is not supported (no constrained decoding yet)", "text.format");
  }

  json chat = {{"messages", input_messages(body)}};
  for (const char* k : kPassThrough)
    if (body.contains(k)) chat[k] = body[k];
  if (present(body, "max_output_tokens")) {
    const json& m = body["max_output_tokens"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1)
      throw bad_request("'max_output_tokens' must be a positive integer", "max_output_tokens");
    chat["max_tokens"] = m;
  }
  if (present(body, "tools")) chat["tools"] = chat_tools(body["tools"]);
  if (present(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(body["tool_choice"]);
  if (present(body, "reasoning")) apply_reasoning(body["reasoning"], chat);
  apply_logprobs(body, chat);
  return chat;
}

// ---------------------------------------------------------------------------------- output items

void ResponsesOutput::open(Open kind, const chat::StreamEvent& e, std::vector<json>& out) {
  close(out);
  open_ = kind;
  text_.clear();
  const size_t index = items_.size();
  json item;
  if (kind == Open::Reasoning) {
    item = {{"id", random_id("rs_")}, {"type", "reasoning"}, {"summary", json::array()}, {"content", json::array()}, {"status", "in_progress"}};
  } else if (kind == Open::Message) {
    message_logprobs_ = json::array();
    item = {{"id", random_id("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"}, {"content", json::array()}};
  } else {
    call_index_ = e.index;
    item = {{"id", random_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"}, {"call_id", e.id}, {"name", e.name}, {"arguments", ""}};
  }
  out.push_back({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item}});
  const json id = item["id"];
  if (kind == Open::Reasoning)
    out.push_back({{"type", "response.content_part.added"}, {"item_id", id}, {"output_index", index}, {"content_index", 0},
                   {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  if (kind == Open::Message)
    out.push_back({{"type", "response.content_part.added"}, {"item_id", id}, {"output_index", index}, {"content_index", 0},
                   {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}}}});
  items_.push_back(std::move(item));
}

void ResponsesOutput::close(std::vector<json>& out) {
  if (open_ == Open::None) return;
  const size_t index = items_.size() - 1;
  json& item = items_.back();
  const json id = item["id"];
  if (open_ == Open::Reasoning) {
    const json part = {{"type", "reasoning_text"}, {"text", text_}};
    out.push_back({{"type", "response.reasoning_text.done"}, {"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text_}});
    out.push_back({{"type", "response.content_part.done"}, {"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    item["content"] = json::array({part});
  } else if (open_ == Open::Message) {
    const json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}, {"logprobs", message_logprobs_}};
    out.push_back({{"type", "response.output_text.done"}, {"item_id", id}, {"output_index", index}, {"content_index", 0},
                   {"text", text_}, {"logprobs", message_logprobs_}});
    out.push_back({{"type", "response.content_part.done"}, {"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    item["content"] = json::array({part});
  } else {
    out.push_back({{"type", "response.function_call_arguments.done"}, {"item_id", id}, {"output_index", index},
                   {"name", item["name"]}, {"arguments", text_}});
    item["arguments"] = text_;
  }
  item["status"] = "completed";
  out.push_back({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
  open_ = Open::None;
}

std::vector<json> ResponsesOutput::push(const std::vector<chat::StreamEvent>& evs, const std::vector<TokenLogprobs>& tokens) {
  using K = chat::StreamEvent::Kind;
  std::vector<json> out;
  if (render_) pending_.insert(pending_.end(), tokens.begin(), tokens.end());
  size_t last_text_delta = SIZE_MAX;  // the index in `out` of this push's last output_text.delta
  bool opened_message = false, other = false;
  for (const auto& e : evs) {
    if ((e.kind == K::Reasoning || e.kind == K::Content) && e.text.empty()) continue;
    if (e.kind != K::Content) other = true;
    if (e.kind == K::Reasoning && open_ != Open::Reasoning) open(Open::Reasoning, e, out);
    if (e.kind == K::Content && open_ != Open::Message) open(Open::Message, e, out), opened_message = true;
    if (e.kind == K::ToolCallBegin) {
      open(Open::Call, e, out);
      continue;
    }
    if (e.kind == K::ToolCallArguments && (open_ != Open::Call || call_index_ != e.index)) continue;  // not expected
    if (e.text.empty()) continue;
    if (e.kind == K::Content) last_text_delta = out.size();
    text_ += e.text;
    const size_t index = items_.size() - 1;
    const json& id = items_.back()["id"];
    if (e.kind == K::Reasoning) {
      reasoning_ += e.text;
      out.push_back({{"type", "response.reasoning_text.delta"}, {"item_id", id}, {"output_index", index}, {"content_index", 0}, {"delta", e.text}});
    } else if (e.kind == K::Content) {
      out.push_back({{"type", "response.output_text.delta"}, {"item_id", id}, {"output_index", index}, {"content_index", 0},
                     {"delta", e.text}, {"logprobs", json::array()}});
    } else {
      out.push_back({{"type", "response.function_call_arguments.delta"}, {"item_id", id}, {"output_index", index}, {"delta", e.text}});
    }
  }
  if (!render_) return out;
  if (last_text_delta != SIZE_MAX) {
    // Message text came out: the held tokens were its text, unless this push opened the message
    // (then they carried what ended the reasoning, and only this push's tokens are the text's).
    const size_t first = opened_message && !tokens.empty() ? pending_.size() - tokens.size() : 0;
    const json entries = render_(std::vector<TokenLogprobs>(pending_.begin() + static_cast<std::ptrdiff_t>(first), pending_.end()));
    for (const json& x : entries) message_logprobs_.push_back(x);
    out[last_text_delta]["logprobs"] = entries;
    pending_.clear();
  } else if (other) {
    pending_.clear();  // reasoning, a tag or a call: not the message's
  }
  return out;
}

std::vector<json> ResponsesOutput::finish() {
  std::vector<json> out;
  close(out);
  return out;
}

// --------------------------------------------------------------------------------- the endpoint

namespace {

// What a response object repeats of its request, and its status.
struct ResponseShape {
  std::string id = random_id("resp_");
  int64_t created_at = 0;
  std::string model;
  json echo;  // instructions, tools, tool_choice, ... as the client sent them (or their defaults)

  json object(const char* status, json output, json usage = nullptr, json incomplete = nullptr) const {
    json r = {{"id", id}, {"object", "response"}, {"created_at", created_at}, {"status", status}, {"background", false},
              {"error", nullptr}, {"incomplete_details", std::move(incomplete)}, {"model", model}, {"output", std::move(output)}};
    for (auto it = echo.begin(); it != echo.end(); ++it) r[it.key()] = it.value();
    r["usage"] = std::move(usage);
    return r;
  }
};

ResponseShape shape_of(const json& body, const ServerState& st) {
  ResponseShape s;
  s.created_at = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  s.model = st.model_name;
  auto value = [&](const char* k, json dflt) { return present(body, k) ? body[k] : dflt; };
  json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (present(body, "reasoning") && present(body["reasoning"], "effort")) reasoning["effort"] = body["reasoning"]["effort"];
  s.echo = {{"instructions", value("instructions", nullptr)},
            {"max_output_tokens", value("max_output_tokens", nullptr)},
            {"metadata", value("metadata", json::object())},
            {"parallel_tool_calls", value("parallel_tool_calls", true)},
            {"previous_response_id", nullptr},
            {"reasoning", std::move(reasoning)},
            {"store", false},  // nothing is kept
            {"temperature", value("temperature", st.defaults.sampling.temperature)},
            {"text", {{"format", {{"type", "text"}}}}},
            {"tool_choice", value("tool_choice", "auto")},
            {"tools", value("tools", json::array())},
            {"top_logprobs", value("top_logprobs", 0)},
            {"top_p", value("top_p", st.defaults.sampling.top_p)},
            {"truncation", "disabled"}};
  return s;
}

json responses_usage(const GenerateStats& s, int prompt_tokens, size_t reasoning_tokens) {
  return {{"input_tokens", prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", s.cached_tokens}}},
          {"output_tokens", s.generated_tokens},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", prompt_tokens + s.generated_tokens}};
}

// The final response object: completed, or incomplete when the token limit cut the output.
json final_object(const ResponseShape& shape, const ResponsesOutput& out, const Event& last, const Job& job, const Engine& engine) {
  const size_t reasoning_tokens = out.reasoning().empty() ? 0 : engine.tokenize(out.reasoning(), false).size();
  const bool cut = last.finish == FinishReason::Length;
  json r = shape.object(cut ? "incomplete" : "completed", out.items(), responses_usage(last.stats, job.prompt_tokens(), reasoning_tokens),
                        cut ? json{{"reason", "max_output_tokens"}} : json(nullptr));
  r["timings"] = timings_json(last.stats);
  return r;
}

// One engine event through the chat layer into `out`, streamed or collected alike (an event may
// carry a token whose text is still held back: its entry goes in without text).
std::vector<json> push_event(ResponsesOutput& out, ChatOutput& chat, const Event& ev) {
  if (ev.text.empty() && ev.logprobs.empty()) return {};
  return out.push(ev.text.empty() ? std::vector<chat::StreamEvent>() : chat.push_events(ev.text), ev.logprobs);
}

// The typed SSE stream: response.created and .in_progress, the items' events, then
// response.completed (or .incomplete); every event numbered by sequence_number.
class ResponsesWriter : public StreamWriter {
 public:
  ResponsesWriter(ResponseShape shape, std::unique_ptr<ChatOutput> chat, const Engine& engine, ResponsesOutput::RenderLogprobs lp)
      : shape_(std::move(shape)), chat_(std::move(chat)), engine_(engine), out_(std::move(lp)) {}

  std::string start(const Job&) override {
    const json snapshot = shape_.object("in_progress", json::array());
    std::string data = frame({{"type", "response.created"}, {"response", snapshot}});  // numbered in order: two statements
    return data + frame({{"type", "response.in_progress"}, {"response", snapshot}});
  }
  std::string event(const Event& ev) override { return frames(push_event(out_, *chat_, ev)); }
  std::string finish(const Event& last, const Job& job) override {
    std::string data = frames(out_.push(chat_->finish_events()));
    data += frames(out_.finish());
    json r = final_object(shape_, out_, last, job, engine_);
    const std::string type = r["status"] == "completed" ? "response.completed" : "response.incomplete";
    return data + frame({{"type", type}, {"response", std::move(r)}});
  }
  std::string fail(const ApiError& e) override {
    json r = shape_.object("failed", out_.items());
    r["error"] = {{"code", e.type}, {"message", e.message}};
    std::string data = frame({{"type", "error"}, {"code", e.type}, {"message", e.message}, {"param", nullptr}});
    return data + frame({{"type", "response.failed"}, {"response", std::move(r)}});
  }

 private:
  std::string frame(json ev) {
    ev["sequence_number"] = seq_++;
    return "event: " + ev["type"].get<std::string>() + "\ndata: " + dump(ev) + "\n\n";
  }
  std::string frames(std::vector<json> evs) {
    std::string data;
    for (auto& ev : evs) data += frame(std::move(ev));
    return data;
  }
  ResponseShape shape_;
  std::unique_ptr<ChatOutput> chat_;
  const Engine& engine_;
  ResponsesOutput out_;
  uint64_t seq_ = 0;
};

}  // namespace

void handle_responses(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  CompletionRequest r = parse_chat_request(responses_to_chat(body), st.defaults);
  check_model(st, r.model);

  ChatJob cj = submit_chat(st, r);
  cj.output.parser.id_prefix = "call_";
  auto chat = std::make_unique<ChatOutput>(std::move(cj.output));
  ResponseShape shape = shape_of(body, st);
  ResponsesOutput::RenderLogprobs lp;
  if (r.gen.logprobs >= 0) lp = [&engine = *st.engine](const std::vector<TokenLogprobs>& t) { return chat_logprobs_content(engine, t); };
  if (r.stream)
    return start_stream(req, res, cj.job, std::make_unique<ResponsesWriter>(std::move(shape), std::move(chat), *st.engine, std::move(lp)));
  ResponsesOutput out(std::move(lp));
  // Fed event by event, as the stream is: with logprobs, each token's entry follows its text.
  const std::optional<Collected> c = collect(*cj.job, req, res, [&](const Event& ev) { push_event(out, *chat, ev); });
  if (!c) return;
  out.push(chat->finish_events());
  out.finish();
  res.set_content(dump(final_object(shape, out, c->last, *cj.job, *st.engine)), "application/json");
}

}  // namespace clover::server
