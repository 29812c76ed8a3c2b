// Rendering the four Qwen templates (tests/chat/templates/) over the conversations of
// tools/chat_gen_fixtures.py, byte-identical to Python jinja2 under HF's settings; request
// normalisation; generation-prompt and open-thinking detection.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "fixtures_util.h"

namespace clover::chat {
namespace {

using testing::load_fixture;
using testing::read_file;

std::string template_source(const std::string& name) {
  return read_file(testing::chat_test_dir() + "/templates/" + name);
}

ChatRequest request_of(const json& r) {
  ChatRequest req;
  req.messages = r["messages"];
  req.tools = r["tools"];
  req.kwargs = r["kwargs"];
  req.add_generation_prompt = r["add_generation_prompt"];
  return req;
}

TEST(ChatTemplateRender, QwenTemplatesMatchPythonJinja2) {
  auto fx = load_fixture("render_cases.json");
  ASSERT_GE(fx["cases"].size(), 40u);
  int compared = 0;
  for (auto it = fx["typed_content"].begin(); it != fx["typed_content"].end(); ++it) {
    const std::string tname = it.key();
    const std::string src = template_source(tname);
    jinja::Template raw(src);
    ChatTemplate ct(src, fx["bos_token"], fx["eos_token"]);
    EXPECT_EQ(ct.supports_typed_content(), it.value().get<bool>()) << tname;
    for (const auto& c : fx["cases"]) {
      const std::string cname = c["name"];
      const json& res = c["results"][tname];
      SCOPED_TRACE(tname + " / " + cname);
      ChatRequest req = request_of(c["request"]);
      EXPECT_EQ(ct.context(req), res["context"]) << "normalisation differs from tools/chat_gen_fixtures.py";
      if (res["status"] == "ok") {
        const std::string expected = res["output"];
        std::string got_raw, got;
        try {
          got_raw = raw.render(res["context"]);
          got = ct.render(req);
        } catch (const jinja::TemplateError& e) {
          ADD_FAILURE() << "render failed: " << e.what();
          continue;
        }
        EXPECT_EQ(got_raw, expected);
        EXPECT_EQ(got, expected);
        ++compared;
      } else {
        try {
          ct.render(req);
          ADD_FAILURE() << "expected an error like jinja2's: " << res["message"].get<std::string>();
        } catch (const jinja::TemplateError& e) {
          if (res["status"] == "raised") {
            EXPECT_TRUE(e.raised);
            EXPECT_EQ(e.message, res["message"].get<std::string>());
          }
        }
      }
    }
  }
  EXPECT_GE(compared, 160);
}

TEST(ChatTemplateRender, GenerationPromptAndThinking) {
  struct Case {
    const char* tmpl;
    json kwargs;
    const char* gen;
    bool open;
  } cases[] = {
      {"Qwen3.5.jinja", json::object(), "<|im_start|>assistant\n<think>\n", true},
      {"Qwen3.5.jinja", {{"enable_thinking", true}}, "<|im_start|>assistant\n<think>\n", true},
      {"Qwen3.5.jinja", {{"enable_thinking", false}}, "<|im_start|>assistant\n<think>\n\n</think>\n\n", false},
      {"Qwen3.jinja", json::object(), "<|im_start|>assistant\n", false},
      {"Qwen3.jinja", {{"enable_thinking", false}}, "<|im_start|>assistant\n<think>\n\n</think>\n\n", false},
      {"Qwen3-Thinking-2507.jinja", json::object(), "<|im_start|>assistant\n<think>\n", true},
      {"Qwen3-Coder.jinja", json::object(), "<|im_start|>assistant\n", false},
  };
  for (const auto& c : cases) {
    ChatTemplate ct(template_source(c.tmpl), "", "<|im_end|>");
    ChatRequest req;
    req.messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
    req.kwargs = c.kwargs;
    RenderedPrompt r = ct.apply(req);
    EXPECT_EQ(r.generation_prompt, c.gen) << c.tmpl << " " << c.kwargs.dump();
    EXPECT_EQ(r.thinking_open, c.open) << c.tmpl << " " << c.kwargs.dump();
    EXPECT_EQ(r.prompt.substr(r.prompt.size() - r.generation_prompt.size()), r.generation_prompt);
    req.add_generation_prompt = false;
    RenderedPrompt r2 = ct.apply(req);
    EXPECT_EQ(r2.generation_prompt, "");
    EXPECT_FALSE(r2.thinking_open);
  }
}

TEST(ChatTemplateRender, NormalisesOpenAIInput) {
  json msgs = json::parse(R"([
    {"role": "developer", "content": "rules"},
    {"role": "assistant", "content": null, "reasoning": "r",
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1, \"b\": [true]}"}},
                    {"type": "function", "function": {"name": "g", "arguments": "not json"}}]},
    {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image_url"}, {"type": "text", "text": "y"}]}
  ])");
  json typed = normalize_messages(msgs, true);
  EXPECT_EQ(typed[0]["role"], "system");
  EXPECT_EQ(typed[1]["reasoning_content"], "r");
  EXPECT_TRUE(typed[1]["content"].is_null());
  EXPECT_EQ(typed[1]["tool_calls"][0]["function"]["arguments"], json::parse(R"({"a": 1, "b": [true]})"));
  EXPECT_EQ(typed[1]["tool_calls"][1]["function"]["arguments"], "not json");
  EXPECT_TRUE(typed[2]["content"].is_array());
  json flat = normalize_messages(msgs, false);
  EXPECT_EQ(flat[1]["content"], "");
  EXPECT_EQ(flat[2]["content"], "x\ny");
  // Key order of arguments is kept (tojson must print them in the client's order).
  json z = normalize_messages(json::parse(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"z\":1,\"a\":2}"}}]}])"), true);
  EXPECT_EQ(z[0]["tool_calls"][0]["function"]["arguments"].dump(), R"({"z":1,"a":2})");
}

TEST(ChatTemplateRender, RaiseExceptionIsAClientError) {
  ChatTemplate ct(template_source("Qwen3.5.jinja"));
  ChatRequest req;
  req.messages = json::array({{{"role", "system"}, {"content", "only system"}}});
  try {
    ct.apply(req);
    FAIL();
  } catch (const jinja::TemplateError& e) {
    EXPECT_TRUE(e.raised);
    EXPECT_EQ(e.message, "No user query found in messages.");
  }
}

}  // namespace
}  // namespace clover::chat
