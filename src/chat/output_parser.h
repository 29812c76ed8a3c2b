// Parsing model output into an OpenAI assistant message: reasoning, content and tool calls, for the
// Qwen3.5 / Qwen3-Coder XML call format and Qwen3's JSON-in-<tool_call> format.
//
//   [<think>] REASONING </think> CONTENT <tool_call>
//   <function=NAME>
//   <parameter=P>
//   VALUE
//   </parameter>
//   </function>
//   </tool_call> ...
//
// One incremental state machine does all the work; parse_output() feeds it the whole text, so the
// streaming result equals the one-shot result however the text is split. It never fails: text that
// cannot be a call stays content. Tolerated on purpose:
//   - reasoning before </think> when the prompt opened <think> (thinking_open), or a <think> the
//     model writes itself at the start;
//   - <tool_call> inside reasoning: it ends the reasoning (a later stray </think> is dropped);
//   - prose before, between and after calls; any number of calls; both call formats in either mode;
//   - values containing '<' or "</parameter>" text: a value ends only at "</parameter>" followed by
//     <parameter=, </function>, </tool_call> or the end of output;
//   - output truncated anywhere: what was parsed is returned, an open call is closed.
// Reasoning and content are trimmed of surrounding whitespace, and whitespace next to tool calls is
// dropped. XML values are typed by the tool's JSON schema (integer, number, boolean, null, object,
// array; Python's True/False/None are accepted); parameters without a schema type stay strings.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace clover::chat {

enum class ToolCallFormat { Qwen35Xml, Qwen3Json };

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, compact (what OpenAI's function.arguments holds)
  bool operator==(const ToolCall&) const = default;
};

struct ParsedMessage {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;

  // {"role":"assistant","content":...,"reasoning_content":...,"tool_calls":[...]}; content is null
  // when empty and there are tool calls; reasoning_content is present only when non-empty.
  nlohmann::ordered_json to_openai() const;
  bool operator==(const ParsedMessage&) const = default;
};

struct ParserOptions {
  ToolCallFormat format = ToolCallFormat::Qwen35Xml;  // both are accepted; this names the expected one
  bool thinking_open = false;        // the prompt ended inside <think>: output starts as reasoning
  nlohmann::ordered_json tools;      // OpenAI tools (for typing parameter values); may be null
  std::string id_prefix = "call_";
  uint64_t id_seed = 0;              // tool-call ids are derived from it; 0 picks a random seed
};

struct StreamEvent {
  enum class Kind { Reasoning, Content, ToolCallBegin, ToolCallArguments };
  Kind kind;
  std::string text;  // reasoning/content text, or a fragment of the arguments JSON
  size_t index = 0;  // tool call index (ToolCallBegin, ToolCallArguments)
  std::string id;    // ToolCallBegin
  std::string name;  // ToolCallBegin
};

class StreamParser {
 public:
  explicit StreamParser(ParserOptions opt);
  ~StreamParser();
  StreamParser(StreamParser&&) noexcept;

  // Feeds more output; returns the events it settles. Text that could still turn out to be a marker
  // (a partial "</think>", trailing whitespace, an incomplete UTF-8 character) is held back.
  std::vector<StreamEvent> push(std::string_view text);
  // End of output (stop or length): settles everything held back and closes an open call.
  std::vector<StreamEvent> finish();

  // Everything emitted so far (after finish(): the final message).
  const ParsedMessage& message() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

ParsedMessage parse_output(std::string_view text, const ParserOptions& opt);

}  // namespace clover::chat
