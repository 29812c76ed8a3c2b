// Issue #26, finding 5: input and model output nested 100,000 deep must give a clean result or a
// clean error, never a stack overflow (the recursion was nlohmann's dump() and copies).
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/json_depth.h"
#include "chat/output_parser.h"

namespace clover::chat {
namespace {

constexpr size_t kDeep = 100000;

std::string nested_array(size_t n) { return std::string(n, '[') + "1" + std::string(n, ']'); }

TEST(ChatDepth, TextDepthIgnoresStringsAndCountsBothBrackets) {
  EXPECT_EQ(json_text_depth(R"({"a":[1,{"b":"[[[["}]})"), 3u);
  EXPECT_EQ(json_text_depth(R"("\"[")"), 0u);
  EXPECT_EQ(json_text_depth(nested_array(kDeep)), kDeep);
  EXPECT_EQ(json_depth(json::parse("[[],{\"a\":[1]}]")), 3u);
}

TEST(ChatDepth, Qwen3JsonCallNestedDeepStaysText) {
  ParserOptions o;
  o.format = ToolCallFormat::Qwen3Json;
  const std::string args = std::string(kDeep, '[') + std::string(kDeep, ']');
  const std::string text = "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"x\":" + args + "}}\n</tool_call>";
  const ParsedMessage m = parse_output(text, o);
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_NE(m.content.find("\"name\":\"f\""), std::string::npos);
  // Within the bound, the same call parses.
  const std::string ok = "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"x\":" + nested_array(100) + "}}\n</tool_call>";
  ASSERT_EQ(parse_output(ok, o).tool_calls.size(), 1u);
}

TEST(ChatDepth, Qwen3StringArgumentsNestedDeepGiveEmptyArguments) {
  ParserOptions o;
  o.format = ToolCallFormat::Qwen3Json;
  const std::string inner = json(std::string("{\"x\":") + nested_array(kDeep) + "}").dump();
  const ParsedMessage m = parse_output("<tool_call>\n{\"name\":\"f\",\"arguments\":" + inner + "}\n</tool_call>", o);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{}");
}

TEST(ChatDepth, Qwen35ArrayParameterNestedDeepBecomesAString) {
  ParserOptions o;
  o.tools = json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"xs":{"type":"array"}}}}}])");
  const std::string value = nested_array(kDeep);
  const ParsedMessage m =
      parse_output("<tool_call>\n<function=f>\n<parameter=xs>\n" + value + "\n</parameter>\n</function>\n</tool_call>", o);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  const json args = json::parse(m.tool_calls[0].arguments);
  ASSERT_TRUE(args["xs"].is_string());
  EXPECT_EQ(args["xs"].get<std::string>().size(), value.size());
}

TEST(ChatDepth, TemplateRefusesAConversationNestedDeep) {
  ChatTemplate t("{% for m in messages %}{{ m.content }}{% endfor %}");
  ChatRequest req;
  req.messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(t.render(req), "hi");
  json deep = json::parse(nested_array(kDeep));
  req.messages[0]["content"] = std::move(deep);  // moved, not copied: a copy would recurse
  try {
    t.render(req);
    FAIL() << "rendered a 100,000-deep conversation";
  } catch (const jinja::TemplateError& e) {
    EXPECT_NE(e.message.find("nests deeper than 256"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace clover::chat
