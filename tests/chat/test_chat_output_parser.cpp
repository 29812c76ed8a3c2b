// Output parsing: every edge case of server-conventions.md §1.4 and §5, each checked one-shot,
// streamed one byte at a time and streamed in random splits (the streamed events must rebuild
// exactly the one-shot message).
#include <gtest/gtest.h>

#include <random>

#include "chat/output_parser.h"

namespace clover::chat {
namespace {

using json = nlohmann::ordered_json;

const json kTools = json::parse(R"j([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
     "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
     "lat": {"type": "number"}, "opts": {"type": "object"}, "tags": {"type": "array"},
     "note": {"type": ["string", "null"]}, "maybe": {"type": ["integer", "null"]},
     "unit": {"enum": ["c", "f"]}, "level": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}}},
  {"type": "function", "function": {"name": "run_code", "parameters": {"type": "object", "properties": {
     "code": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
])j");

struct Call {
  std::string name;
  std::string args;  // expected arguments JSON (compared as parsed JSON)
};

struct Case {
  const char* name;
  bool thinking_open;
  std::string text;
  std::string reasoning;
  std::string content;
  std::vector<Call> calls;
  ToolCallFormat format = ToolCallFormat::Qwen35Xml;
};

std::string xml_call(const std::string& fn, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string s = "<tool_call>\n<function=" + fn + ">\n";
  for (const auto& [k, v] : params) s += "<parameter=" + k + ">\n" + v + "\n</parameter>\n";
  return s + "</function>\n</tool_call>";
}

std::vector<Case> cases() {
  const std::string weather = xml_call("get_weather", {{"city", "Paris"}, {"days", "2"}});
  const std::string weather_args = R"j({"city":"Paris","days":2})j";
  return {
      {"plain_content", false, "Hello there.", "", "Hello there.", {}},
      {"content_trimmed", false, "\n\n  Hello there.  \n", "", "Hello there.", {}},
      {"reasoning_then_content", true, "Let me think.\n</think>\n\nThe answer is 4.", "Let me think.",
       "The answer is 4.", {}},
      {"reasoning_multiline", true, "Step 1.\n\nStep 2 < 3.\n</think>\n\nDone", "Step 1.\n\nStep 2 < 3.", "Done", {}},
      {"empty_reasoning", true, "\n</think>\n\nJust answer.", "", "Just answer.", {}},
      {"model_opens_think_itself", false, "<think>\nhmm\n</think>\n\nok", "hmm", "ok", {}},
      {"redundant_think_when_open", true, "<think>\nhmm\n</think>\nok", "hmm", "ok", {}},
      {"thinking_closed_all_content", false, "No reasoning here.", "", "No reasoning here.", {}},
      {"truncated_in_reasoning", true, "I am still thinking and then the budget ran o", "I am still thinking and then the budget ran o", "", {}},
      {"truncated_partial_close_tag", true, "thinking...\n</thi", "thinking...\n</thi", "", {}},
      {"single_call", true, "Need weather.\n</think>\n\n" + weather, "Need weather.", "", {{"get_weather", weather_args}}},
      {"single_call_no_thinking", false, weather, "", "", {{"get_weather", weather_args}}},
      {"prose_before_call", true, "r\n</think>\n\nLet me check the weather.\n\n" + weather, "r",
       "Let me check the weather.", {{"get_weather", weather_args}}},
      {"parallel_calls", true, "r\n</think>\n\n" + weather + "\n" + xml_call("get_weather", {{"city", "Tokyo"}}), "r", "",
       {{"get_weather", weather_args}, {"get_weather", R"j({"city":"Tokyo"})j"}}},
      {"three_calls_mixed", false,
       xml_call("get_time", {}) + "\n" + weather + "\n" + xml_call("run_code", {{"code", "print(1)"}}), "", "",
       {{"get_time", "{}"}, {"get_weather", weather_args}, {"run_code", R"j({"code":"print(1)"})j"}}},
      {"call_inside_reasoning", true, "I should call the tool.\n" + weather, "I should call the tool.", "",
       {{"get_weather", weather_args}}},
      {"tool_call_mention_in_reasoning", true, "Use <tool_call> tags.\n</think>\n\nAnswer", "Use <tool_call> tags.", "Answer", {}},
      {"call_inside_reasoning_then_close", true, "thinking\n" + weather + "\n</think>\n\n", "thinking", "",
       {{"get_weather", weather_args}}},
      {"call_inside_reasoning_then_text", true, "thinking\n" + weather + "\n</think>\n\nafter", "thinking", "after",
       {{"get_weather", weather_args}}},
      {"no_arguments", false, "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", "", "", {{"get_time", "{}"}}},
      {"typed_values", false,
       xml_call("get_weather", {{"city", "Oslo"}, {"days", "-3"}, {"metric", "True"}, {"lat", "59.91"},
                                {"opts", "{\"a\": [1, 2]}"}, {"tags", "[\"x\", \"y\"]"}, {"note", "None"},
                                {"maybe", "None"}, {"unit", "c"}, {"level", "7"}}),
       "", "",
       {{"get_weather", R"j({"city":"Oslo","days":-3,"metric":true,"lat":59.91,"opts":{"a":[1,2]},"tags":["x","y"],"note":"None","maybe":null,"unit":"c","level":7})j"}}},
      {"typed_values_bad_fall_back_to_string", false,
       xml_call("get_weather", {{"days", "two"}, {"metric", "yes"}, {"opts", "{broken"}, {"lat", "1.2.3"}}), "", "",
       {{"get_weather", R"j({"days":"two","metric":"yes","opts":"{broken","lat":"1.2.3"})j"}}},
      {"string_param_keeps_digits", false, xml_call("get_weather", {{"city", "123"}}), "", "", {{"get_weather", R"j({"city":"123"})j"}}},
      {"unknown_tool_strings", false, xml_call("mystery", {{"x", "1"}, {"y", "true"}}), "", "",
       {{"mystery", R"j({"x":"1","y":"true"})j"}}},
      {"unknown_parameter_string", false, xml_call("get_weather", {{"city", "A"}, {"zzz", "5"}}), "", "",
       {{"get_weather", R"j({"city":"A","zzz":"5"})j"}}},
      {"multiline_code_value", false,
       xml_call("run_code", {{"code", "def f(x):\n    return x < 3\n\n\nprint(f(2))"}}), "", "",
       {{"run_code", R"j({"code":"def f(x):\n    return x < 3\n\n\nprint(f(2))"})j"}}},
      {"value_with_angle_brackets", false, xml_call("run_code", {{"code", "if a<b and c>d: print('<tag>')"}}), "", "",
       {{"run_code", R"j({"code":"if a<b and c>d: print('<tag>')"})j"}}},
      {"value_containing_close_parameter", false,
       xml_call("run_code", {{"code", "s = '</parameter>'\nt = \"</parameter> x\"\n</parameter>oops"}}), "", "",
       {{"run_code", R"j({"code":"s = '</parameter>'\nt = \"</parameter> x\"\n</parameter>oops"})j"}}},
      {"value_containing_xml", false,
       xml_call("run_code", {{"code", "<function=x>\n<parameter=y>\nz"}}), "", "",
       {{"run_code", R"j({"code":"<function=x>\n<parameter=y>\nz"})j"}}},
      {"value_with_extra_newlines", false, "<tool_call>\n<function=run_code>\n<parameter=code>\n\nx\n\n</parameter>\n</function>\n</tool_call>", "", "",
       {{"run_code", R"j({"code":"\nx\n"})j"}}},
      {"value_no_newlines", false, "<tool_call><function=run_code><parameter=code>x</parameter></function></tool_call>", "", "",
       {{"run_code", R"j({"code":"x"})j"}}},
      {"value_unicode_and_quotes", false, xml_call("run_code", {{"code", "print(\"héllo 🌍\\n\")\t"}}), "", "",
       {{"run_code", R"j({"code":"print(\"héllo 🌍\\n\")\t"})j"}}},
      {"truncated_in_value", false, "<tool_call>\n<function=run_code>\n<parameter=code>\nprint(1)\nprint(", "", "",
       {{"run_code", R"j({"code":"print(1)\nprint("})j"}}},
      {"truncated_typed_value", false, "<tool_call>\n<function=get_weather>\n<parameter=days>\n1", "", "",
       {{"get_weather", R"j({"days":1})j"}}},
      {"truncated_after_function_header", false, "prose <tool_call>\n<function=get_time>", "", "prose", {{"get_time", "{}"}}},
      {"truncated_in_function_name", false, "<tool_call>\n<function=get_ti", "", "", {{"get_ti", "{}"}}},
      {"truncated_after_tool_call_tag", true, "r\n</think>\n\n<tool_call>\n", "r", "<tool_call>", {}},
      {"truncated_partial_tool_call_tag", false, "See <tool_ca", "", "See <tool_ca", {}},
      {"missing_close_tool_call", false, "<tool_call>\n<function=get_time>\n</function>\nThen prose.", "", "Then prose.",
       {{"get_time", "{}"}}},
      {"missing_close_function", false, "<tool_call>\n<function=get_time>\n</tool_call>", "", "", {{"get_time", "{}"}}},
      {"two_functions_one_block", false,
       "<tool_call>\n<function=get_time>\n</function>\n<function=run_code>\n<parameter=code>\nx\n</parameter>\n</function>\n</tool_call>",
       "", "", {{"get_time", "{}"}, {"run_code", R"j({"code":"x"})j"}}},
      {"malformed_not_a_call", false, "Text <tool_call>\nnot a call\n</tool_call> end", "", "Text <tool_call>\nnot a call\n</tool_call> end", {}},
      {"malformed_then_valid", false, "<tool_call>oops</tool_call>\n" + weather, "", "<tool_call>oops</tool_call>",
       {{"get_weather", weather_args}}},
      {"bad_function_name_newline", false, "<tool_call>\n<function=get\nweather>\n</function></tool_call>", "",
       "<tool_call>\n<function=get\nweather>\n</function></tool_call>", {}},
      {"prose_after_calls", false, weather + "\nI called it.", "", "I called it.", {{"get_weather", weather_args}}},
      {"prose_between_calls", false, "A\n" + weather + "\nB\n" + weather, "", "A\nB",
       {{"get_weather", weather_args}, {"get_weather", weather_args}}},
      {"stray_text_in_function_body", false, "<tool_call>\n<function=get_time>\njunk here\n</function>\n</tool_call>", "", "",
       {{"get_time", "{}"}}},
      {"lone_angle_brackets", true, "a < b > c <\n</think>\n\n1 < 2 <<>>", "a < b > c <", "1 < 2 <<>>", {}},
      {"close_think_in_content_kept", false, "answer </think> more", "", "answer </think> more", {}},
      {"im_end_is_not_parsed", false, "text", "", "text", {}},
      {"invalid_utf8", false, "bad \xff\xfe bytes", "", "bad \xff\xfe bytes", {}},
      {"truncated_utf8_at_end", false, "caf\xc3", "", "caf\xc3", {}},
      // Qwen3 JSON format.
      {"json_call", true, "r\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
       "r", "", {{"get_weather", weather_args}}, ToolCallFormat::Qwen3Json},
      {"json_parallel_with_prose", false,
       "Checking.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"run_code\", \"arguments\": {\"code\": \"a</tool\"}}\n</tool_call>",
       "", "Checking.", {{"get_time", "{}"}, {"run_code", R"j({"code":"a</tool"})j"}}, ToolCallFormat::Qwen3Json},
      {"json_arguments_as_string", false, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}\n</tool_call>",
       "", "", {{"get_time", R"j({"tz":"UTC"})j"}}, ToolCallFormat::Qwen3Json},
      {"json_parameters_key", false, "<tool_call>{\"name\": \"get_time\", \"parameters\": {\"tz\": 1}}</tool_call>", "", "",
       {{"get_time", R"j({"tz":1})j"}}, ToolCallFormat::Qwen3Json},
      {"json_invalid_stays_content", false, "<tool_call>\n{\"name\": get_time}\n</tool_call>", "",
       "<tool_call>\n{\"name\": get_time}\n</tool_call>", {}, ToolCallFormat::Qwen3Json},
      {"json_truncated_stays_content", false, "<tool_call>\n{\"name\": \"get_time\", \"argu", "",
       "<tool_call>\n{\"name\": \"get_time\", \"argu", {}, ToolCallFormat::Qwen3Json},
      {"json_call_inside_reasoning", true, "think\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", "think", "",
       {{"get_time", "{}"}}, ToolCallFormat::Qwen3Json},
      {"json_format_accepts_xml_call", false, weather, "", "", {{"get_weather", weather_args}}, ToolCallFormat::Qwen3Json},
      {"xml_format_accepts_json_call", false, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", "", "",
       {{"get_time", "{}"}}},
  };
}

ParserOptions options(const Case& c) {
  ParserOptions o;
  o.format = c.format;
  o.thinking_open = c.thinking_open;
  o.tools = kTools;
  o.id_seed = 42;
  return o;
}

// Rebuilds a message from events, checking their order (a header before its arguments, indices
// counting up).
ParsedMessage replay(const std::vector<StreamEvent>& events) {
  ParsedMessage m;
  for (const auto& e : events) {
    switch (e.kind) {
      case StreamEvent::Kind::Reasoning: m.reasoning += e.text; break;
      case StreamEvent::Kind::Content: m.content += e.text; break;
      case StreamEvent::Kind::ToolCallBegin:
        EXPECT_EQ(e.index, m.tool_calls.size());
        m.tool_calls.push_back({e.id, e.name, ""});
        break;
      case StreamEvent::Kind::ToolCallArguments:
        EXPECT_LT(e.index, m.tool_calls.size());
        if (e.index < m.tool_calls.size()) m.tool_calls[e.index].arguments += e.text;
        break;
    }
  }
  return m;
}

ParsedMessage stream(const Case& c, const std::vector<size_t>& cuts, std::vector<StreamEvent>* all = nullptr) {
  StreamParser p(options(c));
  std::vector<StreamEvent> events;
  size_t prev = 0;
  for (size_t cut : cuts) {
    auto ev = p.push(std::string_view(c.text).substr(prev, cut - prev));
    events.insert(events.end(), ev.begin(), ev.end());
    prev = cut;
  }
  auto ev = p.push(std::string_view(c.text).substr(prev));
  events.insert(events.end(), ev.begin(), ev.end());
  ev = p.finish();
  events.insert(events.end(), ev.begin(), ev.end());
  ParsedMessage rebuilt = replay(events);
  EXPECT_EQ(rebuilt, p.message()) << "events do not rebuild the message";
  if (all) *all = events;
  return p.message();
}

TEST(OutputParser, EdgeCasesOneShot) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    ParsedMessage m = parse_output(c.text, options(c));
    EXPECT_EQ(m.reasoning, c.reasoning);
    EXPECT_EQ(m.content, c.content);
    ASSERT_EQ(m.tool_calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(m.tool_calls[i].name, c.calls[i].name);
      json got = json::parse(m.tool_calls[i].arguments, nullptr, false);
      ASSERT_FALSE(got.is_discarded()) << "arguments are not JSON: " << m.tool_calls[i].arguments;
      EXPECT_EQ(got, json::parse(c.calls[i].args)) << m.tool_calls[i].arguments;
      EXPECT_EQ(m.tool_calls[i].id.rfind("call_", 0), 0u);
    }
    json o = m.to_openai();  // serialisable even with invalid UTF-8 in the output
    EXPECT_NO_THROW(o.dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

TEST(OutputParser, StreamingByteByByteEqualsOneShot) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<size_t> cuts;
    for (size_t i = 1; i < c.text.size(); ++i) cuts.push_back(i);
    EXPECT_EQ(stream(c, cuts), parse_output(c.text, options(c)));
  }
}

TEST(OutputParser, StreamingRandomSplitsEqualOneShot) {
  std::mt19937 rng(1234);
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    ParsedMessage want = parse_output(c.text, options(c));
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<size_t> cuts;
      for (size_t i = 1; i < c.text.size(); ++i)
        if (rng() % 5 == 0) cuts.push_back(i);
      EXPECT_EQ(stream(c, cuts), want) << "trial " << trial;
    }
  }
}

TEST(OutputParser, StreamingEmitsEarlyAndInOrder) {
  // A long string argument arrives in several fragments, before the call is complete; the header
  // comes first; no raw XML reaches content.
  ParserOptions o;
  o.tools = kTools;
  o.thinking_open = true;
  StreamParser p(o);
  std::string text = "Reasoning here.\n</think>\n\nCalling.\n<tool_call>\n<function=run_code>\n<parameter=code>\n" +
                     std::string(200, 'x') + "\n</parameter>\n</function>\n</tool_call>";
  std::vector<StreamEvent> events;
  bool saw_reasoning_before_close = false;
  for (size_t i = 0; i < text.size(); ++i) {
    auto ev = p.push(text.substr(i, 1));
    for (auto& e : ev) {
      if (e.kind == StreamEvent::Kind::Reasoning && i < text.find("</think>")) saw_reasoning_before_close = true;
      events.push_back(e);
    }
  }
  for (auto& e : p.finish()) events.push_back(e);
  EXPECT_TRUE(saw_reasoning_before_close);
  size_t arg_events = 0, header_at = SIZE_MAX;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == StreamEvent::Kind::ToolCallBegin) {
      header_at = i;
      EXPECT_EQ(events[i].name, "run_code");
      EXPECT_FALSE(events[i].id.empty());
    }
    if (events[i].kind == StreamEvent::Kind::ToolCallArguments) {
      EXPECT_GT(i, header_at);
      ++arg_events;
    }
    if (events[i].kind == StreamEvent::Kind::Content) EXPECT_EQ(events[i].text.find('<'), std::string::npos);
  }
  EXPECT_GT(arg_events, 10u);
  EXPECT_EQ(p.message().content, "Calling.");
  EXPECT_EQ(json::parse(p.message().tool_calls.at(0).arguments)["code"], std::string(200, 'x'));
}

TEST(OutputParser, OpenAIMessageShape) {
  ParserOptions o;
  o.tools = kTools;
  o.thinking_open = true;
  o.id_seed = 7;
  ParsedMessage m = parse_output("why\n</think>\n\n" + xml_call("get_time", {}), o);
  json j = m.to_openai();
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_TRUE(j["content"].is_null());
  EXPECT_EQ(j["reasoning_content"], "why");
  EXPECT_EQ(j["tool_calls"][0]["type"], "function");
  EXPECT_EQ(j["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_EQ(j["tool_calls"][0]["function"]["arguments"], "{}");
  // Same seed, same ids; ids differ between calls.
  ParsedMessage m2 = parse_output("why\n</think>\n\n" + xml_call("get_time", {}) + xml_call("get_time", {}), o);
  EXPECT_EQ(m2.tool_calls[0].id, m.tool_calls[0].id);
  EXPECT_NE(m2.tool_calls[0].id, m2.tool_calls[1].id);
  ParsedMessage plain = parse_output("just text", ParserOptions{});
  EXPECT_EQ(plain.to_openai().dump(), R"j({"role":"assistant","content":"just text"})j");
}

}  // namespace
}  // namespace clover::chat
