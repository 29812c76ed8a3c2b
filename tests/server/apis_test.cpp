// The Responses and Messages APIs without HTTP or a model: their requests translated into chat
// requests (and checked by the chat parser), and fixed model text shaped into output items and
// content blocks, with the stream events that build them adding up to the same output for any split.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/chat_stream.h"
#include "server/messages_api.h"
#include "server/request.h"
#include "server/responses_api.h"

namespace clover::server {
namespace {

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
  "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])";

const char* kOutput =
    "Two cities.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nLisbon\n"
    "</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n"
    "<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>";

ChatOutputOptions options() {
  ChatOutputOptions o;
  o.parser.thinking_open = true;
  o.parser.tools = json::parse(kTools);
  o.parser.id_seed = 1;
  return o;
}

// Feeds kOutput in pieces of `step` bytes through the chat layer into `out`; returns the events.
template <class Output>
std::vector<json> shape(Output& out, size_t step) {
  ChatOutput chat(options());
  std::vector<json> evs;
  const std::string text = kOutput;
  auto add = [&](std::vector<json> more) { evs.insert(evs.end(), more.begin(), more.end()); };
  for (size_t i = 0; i < text.size(); i += step) add(out.push(chat.push_events(std::string_view(text).substr(i, step))));
  add(out.push(chat.finish_events()));
  add(out.finish());
  return evs;
}

std::string joined(const std::vector<json>& evs, const char* type, const char* key, const char* sub = nullptr) {
  std::string s;
  for (const auto& e : evs)
    if (e["type"] == type) s += sub ? e[key][sub].get<std::string>() : e[key].get<std::string>();
  return s;
}

TEST(ServerResponsesApi, InputItemsBecomeChatMessages) {
  const json body = json::parse(R"({
    "model": "m", "instructions": "Be brief.", "max_output_tokens": 64, "reasoning": {"effort": "none"},
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "get_weather"},
    "input": [
      {"role": "developer", "content": [{"type": "input_text", "text": "Use tools."}]},
      {"type": "message", "role": "user", "content": "Warmer in Lisbon or Oslo?"},
      {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Two calls."}]},
      {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Lisbon\"}"},
      {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "21"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "4"}]}
    ]})");
  const json chat = responses_to_chat(body);
  const json& m = chat["messages"];
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], json::parse(R"({"role":"system","content":"Be brief.\n\nUse tools."})"));
  EXPECT_EQ(m[1]["role"], "user");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["reasoning_content"], "Two calls.");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[2]["tool_calls"][1]["id"], "c2");
  EXPECT_EQ(m[3], json::parse(R"({"role":"tool","tool_call_id":"c1","content":"21"})"));
  EXPECT_EQ(m[4]["content"], "4");
  EXPECT_EQ(chat["max_tokens"], 64);
  EXPECT_EQ(chat["enable_thinking"], false);
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "get_weather");

  const CompletionRequest r = parse_chat_request(chat, RequestDefaults{});
  EXPECT_EQ(r.gen.max_tokens, 64);
  EXPECT_EQ(r.chat.kwargs["enable_thinking"], false);
}

TEST(ServerResponsesApi, RefusesStateAndWhatItCannotExpress) {
  for (const char* body : {R"({"input":"hi","previous_response_id":"resp_1"})", R"({"input":[{"type":"item_reference","id":"x"}]})",
                           R"({"input":"hi","tool_choice":{"type":"web_search"}})", R"({"input":"hi","reasoning":{"effort":"max"}})",
                           R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]})", R"({})",
                           R"({"input":"hi","background":true})", R"({"input":[{"type":"function_call","name":"f","arguments":"{}"}]})"}) {
    EXPECT_THROW(responses_to_chat(json::parse(body)), ApiError) << body;
  }
  EXPECT_NO_THROW(responses_to_chat(json::parse(R"({"input":"hi","store":true,"text":{"format":{"type":"text"}}})")));
}

TEST(ServerResponsesApi, OutputItemsAndTheirEventsForAnySplit) {
  ResponsesOutput whole;
  shape(whole, 10000);
  const json& items = whole.items();
  ASSERT_EQ(items.size(), 4u) << items.dump();
  EXPECT_EQ(items[0]["type"], "reasoning");
  EXPECT_EQ(items[0]["content"][0], json::parse(R"({"type":"reasoning_text","text":"Two cities."})"));
  EXPECT_EQ(items[1]["type"], "message");
  EXPECT_EQ(items[1]["content"][0]["text"], "Let me check.");
  EXPECT_EQ(items[2]["type"], "function_call");
  EXPECT_EQ(json::parse(items[2]["arguments"].get<std::string>()), json::parse(R"({"city":"Lisbon","days":2})"));
  EXPECT_EQ(items[3]["name"], "get_weather");
  EXPECT_NE(items[2]["call_id"], items[3]["call_id"]);
  for (const auto& it : items) EXPECT_EQ(it["status"], "completed");
  EXPECT_EQ(whole.reasoning(), "Two cities.");

  for (size_t step : {1, 3, 7}) {
    ResponsesOutput out;
    const std::vector<json> evs = shape(out, step);
    EXPECT_EQ(joined(evs, "response.reasoning_text.delta", "delta"), "Two cities.");
    EXPECT_EQ(joined(evs, "response.output_text.delta", "delta"), "Let me check.");
    std::vector<json> done;
    for (const auto& e : evs)
      if (e["type"] == "response.output_item.done") done.push_back(e["item"]);
    ASSERT_EQ(done.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(done[i]["type"], items[i]["type"]);
      EXPECT_EQ(done[i], out.items()[i]);
    }
    EXPECT_EQ(out.items()[2]["arguments"], items[2]["arguments"]) << "step " << step;
  }
}

// Model text cut into token-like pieces: a tag whole, a run of letters, any other byte alone.
std::vector<std::string> pieces(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t j = i + 1;
    if (text[i] == '<' && text.find('>', i) != std::string::npos) j = text.find('>', i) + 1;
    else if (std::isalpha(static_cast<unsigned char>(text[i])))
      while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

// Feeds `text` piece by piece, each with its token's entry (token id = piece index), as the
// engine's events are; the renderer writes each entry as its piece.
std::vector<json> shape_tokens(ResponsesOutput& out, const std::string& text, ChatOutputOptions opts) {
  ChatOutput chat(std::move(opts));
  std::vector<json> evs;
  auto add = [&](std::vector<json> more) { evs.insert(evs.end(), more.begin(), more.end()); };
  const std::vector<std::string> p = pieces(text);
  for (size_t i = 0; i < p.size(); ++i)
    add(out.push(chat.push_events(p[i]), {TokenLogprobs{static_cast<int32_t>(i), -0.5, {}}}));
  add(out.push(chat.finish_events()));
  add(out.finish());
  return evs;
}

std::string entry_text(const json& entries) {
  std::string s;
  for (const json& e : entries) s += e["token"].get<std::string>();
  return s;
}

TEST(ServerResponsesApi, MessageLogprobsAreTheTokensOfItsText) {
  const std::vector<std::string> p = pieces(kOutput);
  ResponsesOutput::RenderLogprobs render = [&](const std::vector<TokenLogprobs>& t) {
    json a = json::array();
    for (const TokenLogprobs& x : t) a.push_back({{"token", p.at(static_cast<size_t>(x.token))}, {"logprob", x.logprob}});
    return a;
  };
  ResponsesOutput out(render);
  const std::vector<json> evs = shape_tokens(out, kOutput, options());
  const json& msg = out.items()[1];
  ASSERT_EQ(msg["type"], "message");
  // Not the tokens of the reasoning, of </think> or the blank line after it, nor of the tool calls
  // (the blank line before <tool_call> included): exactly the text's.
  EXPECT_EQ(entry_text(msg["content"][0]["logprobs"]), "Let me check.");
  std::string deltas;
  for (const json& e : evs)
    if (e["type"] == "response.output_text.delta") {
      EXPECT_EQ(entry_text(e["logprobs"]), e["delta"].get<std::string>()) << "each delta carries its own tokens";
      deltas += entry_text(e["logprobs"]);
    }
  EXPECT_EQ(deltas, "Let me check.");
  for (const json& e : evs)
    if (e["type"] == "response.output_text.done") EXPECT_EQ(e["logprobs"], msg["content"][0]["logprobs"]);

  // Text the parser held back (a '<' that might open a tag) joins the message when it turns out to be text.
  ChatOutputOptions plain;
  plain.parser.thinking_open = false;
  const std::string text = "if x <y then";
  const std::vector<std::string> q = pieces(text);
  ResponsesOutput held([&](const std::vector<TokenLogprobs>& t) {
    json a = json::array();
    for (const TokenLogprobs& x : t) a.push_back({{"token", q.at(static_cast<size_t>(x.token))}});
    return a;
  });
  shape_tokens(held, text, plain);
  EXPECT_EQ(held.items()[0]["content"][0]["text"], text);
  EXPECT_EQ(entry_text(held.items()[0]["content"][0]["logprobs"]), text);

  // Without a renderer: no entries.
  ResponsesOutput none;
  shape_tokens(none, kOutput, options());
  EXPECT_EQ(none.items()[1]["content"][0]["logprobs"], json::array());
}

TEST(ServerResponsesApi, LogprobsAskedByIncludeOrTopLogprobs) {
  const json on = responses_to_chat(json::parse(R"({"input":"hi","include":["message.output_text.logprobs"]})"));
  EXPECT_EQ(on["logprobs"], true);
  EXPECT_EQ(on["top_logprobs"], 0);
  const json top = responses_to_chat(json::parse(R"({"input":"hi","top_logprobs":3,"include":["reasoning.encrypted_content"]})"));
  EXPECT_EQ(top["logprobs"], true);
  EXPECT_EQ(top["top_logprobs"], 3);
  EXPECT_EQ(parse_chat_request(top, RequestDefaults{}).gen.logprobs, 3);
  const json off = responses_to_chat(json::parse(R"({"input":"hi","top_logprobs":0,"include":["reasoning.encrypted_content"]})"));
  EXPECT_FALSE(off.contains("logprobs"));
  EXPECT_EQ(parse_chat_request(off, RequestDefaults{}).gen.logprobs, -1);
  for (const char* body : {R"({"input":"hi","top_logprobs":21})", R"({"input":"hi","top_logprobs":-1})", R"({"input":"hi","top_logprobs":"3"})",
                           R"({"input":"hi","include":"message.output_text.logprobs"})", R"({"input":"hi","include":[1]})"})
    EXPECT_THROW(responses_to_chat(json::parse(body)), ApiError) << body;
}

TEST(ServerMessagesApi, ContentBlocksBecomeChatMessages) {
  const json body = json::parse(R"({
    "model": "m", "max_tokens": 100, "system": [{"type": "text", "text": "Be brief."}],
    "thinking": {"type": "disabled"}, "stop_sequences": ["END"],
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "Warmer in Lisbon or Oslo?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "Two calls.", "signature": ""},
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Lisbon"}},
        {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"city": "Oslo"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "21"},
        {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "4"}]},
        {"type": "text", "text": "Answer now."}]}
    ]})");
  const json chat = messages_to_chat(body);
  const json& m = chat["messages"];
  ASSERT_EQ(m.size(), 6u) << m.dump();
  EXPECT_EQ(m[0], json::parse(R"({"role":"system","content":"Be brief."})"));
  EXPECT_EQ(m[2]["reasoning_content"], "Two calls.");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], json::parse(R"({"city":"Lisbon"})"));
  EXPECT_EQ(m[3], json::parse(R"({"role":"tool","tool_call_id":"t1","content":"21"})"));
  EXPECT_EQ(m[4]["content"], "4");
  EXPECT_EQ(m[5], json::parse(R"({"role":"user","content":"Answer now."})"));
  EXPECT_EQ(chat["tool_choice"], "required");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["enable_thinking"], false);

  const CompletionRequest r = parse_chat_request(chat, RequestDefaults{});
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"END"});
  EXPECT_FALSE(r.parallel_tool_calls);
}

TEST(ServerMessagesApi, SystemMessagesJoinTheSystemPrompt) {
  const json chat = messages_to_chat(json::parse(R"({"max_tokens":8,"system":"A.",
    "messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"text","text":"B."}]},{"role":"user","content":"go"}]})"));
  ASSERT_EQ(chat["messages"].size(), 3u);
  EXPECT_EQ(chat["messages"][0], json::parse(R"({"role":"system","content":"A.\n\nB."})"));
  EXPECT_EQ(chat["messages"][2]["content"], "go");
}

TEST(ServerMessagesApi, RefusesWhatItCannotExpress) {
  for (const char* body : {R"({"messages":[{"role":"user","content":"hi"}]})",  // no max_tokens
                           R"({"max_tokens":8,"messages":[{"role":"tool","content":"hi"}]})",
                           R"({"max_tokens":8,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
                           R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"The"}]})",
                           R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"bash_20250124","name":"bash"}]})",
                           R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"maybe"}})",
                           R"({"max_tokens":0,"messages":[{"role":"user","content":"hi"}]})"}) {
    EXPECT_THROW(messages_to_chat(json::parse(body)), ApiError) << body;
  }
  EXPECT_NO_THROW(messages_to_chat(json::parse(R"({"messages":[{"role":"user","content":"hi"}]})"), /*count_only=*/true));
}

TEST(ServerMessagesApi, ContentBlocksAndTheirEventsForAnySplit) {
  MessagesOutput whole;
  shape(whole, 10000);
  const json& b = whole.blocks();
  ASSERT_EQ(b.size(), 4u) << b.dump();
  EXPECT_EQ(b[0], json::parse(R"({"type":"thinking","thinking":"Two cities.","signature":""})"));
  EXPECT_EQ(b[1], json::parse(R"({"type":"text","text":"Let me check."})"));
  EXPECT_EQ(b[2]["input"], json::parse(R"({"city":"Lisbon","days":2})"));
  EXPECT_EQ(b[3]["input"], json::parse(R"({"city":"Oslo"})"));
  EXPECT_TRUE(whole.has_tool_use());

  for (size_t step : {1, 4}) {
    MessagesOutput out;
    const std::vector<json> evs = shape(out, step);
    EXPECT_EQ(out.blocks(), b);
    std::vector<std::string> inputs(4);
    int starts = 0, stops = 0;
    for (const auto& e : evs) {
      starts += e["type"] == "content_block_start";
      stops += e["type"] == "content_block_stop";
      if (e["type"] == "content_block_delta" && e["delta"]["type"] == "input_json_delta")
        inputs[e["index"].get<size_t>()] += e["delta"]["partial_json"].get<std::string>();
    }
    EXPECT_EQ(starts, 4);
    EXPECT_EQ(stops, 4);
    EXPECT_EQ(json::parse(inputs[2]), b[2]["input"]);
    EXPECT_EQ(json::parse(inputs[3]), b[3]["input"]);
  }
}

TEST(ServerMessagesApi, ErrorsInAnthropicsShape) {
  EXPECT_EQ(anthropic_error_body(bad_request("no")), json::parse(R"({"type":"error","error":{"type":"invalid_request_error","message":"no"}})"));
  EXPECT_EQ(anthropic_error_body(ApiError(401, "authentication_error", "k"))["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_body(unavailable("busy"))["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_error_body(server_error("bug"))["error"]["type"], "api_error");
}

}  // namespace
}  // namespace clover::server
