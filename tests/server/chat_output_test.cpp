// The server's shaping of parsed model output into OpenAI messages and stream deltas, on fixed
// model text (the default model's random output never contains reasoning ends or tool calls).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/chat_stream.h"
#include "server/request.h"
#include "server/response.h"

namespace clover::server {
namespace {

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
  "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";

const char* kOutput =
    "The user wants two things.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
    "</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
    "<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>";

ChatOutputOptions options(bool parallel = true) {
  ChatOutputOptions o;
  o.parser.thinking_open = true;
  o.parser.tools = json::parse(kTools);
  o.parser.id_seed = 1;
  o.parallel_tool_calls = parallel;
  return o;
}

// Streams `text` in pieces of `step` bytes; returns every delta.
std::vector<json> stream(ChatOutput& out, const std::string& text, size_t step) {
  std::vector<json> all;
  for (size_t i = 0; i < text.size(); i += step)
    for (auto& d : out.push(std::string_view(text).substr(i, step))) all.push_back(std::move(d));
  for (auto& d : out.finish()) all.push_back(std::move(d));
  return all;
}

TEST(ServerChatOutput, MessageHasReasoningAliasContentAndCalls) {
  ChatOutput out(options());
  stream(out, kOutput, 1000);
  const json m = out.message();
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["reasoning_content"], "The user wants two things.");
  EXPECT_EQ(m["reasoning"], m["reasoning_content"]);
  EXPECT_EQ(m["content"], "Let me check.");
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()), json::parse(R"({"city":"Paris","days":2})"));
  EXPECT_EQ(m["tool_calls"][1]["type"], "function");
  EXPECT_NE(m["tool_calls"][0]["id"], m["tool_calls"][1]["id"]);
  EXPECT_TRUE(out.has_tool_calls());
  EXPECT_STREQ(finish_reason(FinishReason::Stop, out.has_tool_calls()), "tool_calls");
  EXPECT_STREQ(finish_reason(FinishReason::Length, out.has_tool_calls()), "length");
}

TEST(ServerChatOutput, StreamDeltasRebuildTheMessageForAnySplit) {
  for (size_t step : {1u, 3u, 7u, 64u}) {
    ChatOutput out(options());
    const auto deltas = stream(out, kOutput, step);
    std::string reasoning, content;
    std::vector<std::string> names, ids, args(2);
    bool saw_content_before_call_header = false;
    for (const auto& d : deltas) {
      ASSERT_EQ(d.size() - (d.contains("reasoning") ? 1 : 0), 1u) << "one kind of change per delta: " << d.dump();
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("content")) {
        content += d["content"].get<std::string>();
        saw_content_before_call_header = names.empty();
      }
      if (d.contains("tool_calls")) {
        const json& tc = d["tool_calls"][0];
        const size_t idx = tc["index"].get<size_t>();
        if (tc.contains("id")) {  // header: index, id, type, name, empty arguments
          ASSERT_EQ(idx, names.size());
          EXPECT_EQ(tc["type"], "function");
          EXPECT_EQ(tc["function"]["arguments"], "");
          names.push_back(tc["function"]["name"]);
          ids.push_back(tc["id"]);
        } else {  // fragment: after its header
          ASSERT_LT(idx, names.size());
          EXPECT_FALSE(tc.contains("id"));
          args[idx] += tc["function"]["arguments"].get<std::string>();
        }
      }
    }
    const json m = out.message();
    EXPECT_EQ(reasoning, m["reasoning_content"]) << step;
    EXPECT_EQ(content, m["content"]) << step;
    EXPECT_TRUE(saw_content_before_call_header);
    ASSERT_EQ(names.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(names[i], m["tool_calls"][i]["function"]["name"]);
      EXPECT_EQ(ids[i], m["tool_calls"][i]["id"]);
      EXPECT_EQ(json::parse(args[i]), json::parse(m["tool_calls"][i]["function"]["arguments"].get<std::string>())) << step;
    }
  }
}

TEST(ServerChatOutput, ParallelToolCallsFalseKeepsTheFirstCall) {
  ChatOutput out(options(false));
  const auto deltas = stream(out, kOutput, 5);
  for (const auto& d : deltas) {
    if (d.contains("tool_calls")) {
      EXPECT_EQ(d["tool_calls"][0]["index"], 0);
    }
  }
  EXPECT_EQ(out.message()["tool_calls"].size(), 1u);
}

TEST(ServerChatOutput, ThinkingOffPutsEverythingInContent) {
  ChatOutputOptions o = options();
  o.parser.thinking_open = false;
  ChatOutput out(o);
  stream(out, "Just an answer.", 2);
  const json m = out.message();
  EXPECT_EQ(m["content"], "Just an answer.");
  EXPECT_FALSE(m.contains("reasoning_content"));
  EXPECT_FALSE(out.has_tool_calls());
}

TEST(ServerChatOutput, ReasoningFormatNoneIsRaw) {
  ChatOutputOptions o = options();
  o.parse = false;
  ChatOutput out(o);
  const auto deltas = stream(out, kOutput, 9);
  std::string content;
  for (const auto& d : deltas) content += d["content"].get<std::string>();
  EXPECT_EQ(content, kOutput);
  EXPECT_EQ(out.message()["content"], kOutput);
  EXPECT_FALSE(out.has_tool_calls());
}

TEST(ServerRequest, ChatFieldsAndThinkingPrecedence) {
  RequestDefaults d;
  d.chat_template_kwargs = {{"enable_thinking", false}};
  const json body = json::parse(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,
    "temperature":0,"stop":["x",""],"seed":3,"enable_thinking":true,"chat_template_kwargs":{"foo":1},
    "clover":{"mode":"diffusion","threshold":0.5,"block_size":16},"stream":true,"stream_options":{"include_usage":true}})");
  const CompletionRequest r = parse_chat_request(body, d);
  EXPECT_EQ(r.gen.max_tokens, 5);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.gen.sampling.temperature, 0.0f);
  EXPECT_EQ(r.gen.sampling.seed, 3u);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.chat.kwargs["enable_thinking"], true);
  EXPECT_EQ(r.chat.kwargs["foo"], 1);
  EXPECT_EQ(r.gen.mode, DecodeMode::Diffusion);
  EXPECT_FLOAT_EQ(r.gen.threshold, 0.5f);
  EXPECT_EQ(r.gen.block_size, 16);
  EXPECT_TRUE(r.stream && r.include_usage);
}

TEST(ServerRequest, ErrorsNameTheField) {
  RequestDefaults d;
  try {
    parse_chat_request(json::parse(R"({"messages":[{"role":"user","content":"hi"}],"top_p":"x"})"), d);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(e.message.find("top_p"), std::string::npos);
    EXPECT_EQ(e.body()["error"]["param"], "top_p");
  }
  EXPECT_THROW(parse_completion_request(json::parse(R"({"prompt":[1,2,600]})"), d, 512), ApiError);
  EXPECT_THROW(parse_body("{"), ApiError);
}

}  // namespace
}  // namespace clover::server
