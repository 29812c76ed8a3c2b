// Model output text -> OpenAI assistant message, incrementally. The same object serves streaming
// (push() returns the deltas to send) and non-streaming responses (message() after finish()), so
// both always agree. Parsing itself is the chat layer's StreamParser; this class only shapes its
// events into OpenAI deltas (the Responses and Messages APIs shape the same events their way,
// through push_events()):
//   {"reasoning_content": "...", "reasoning": "..."}      reasoning text (both names, see docs)
//   {"content": "..."}                                   answer text
//   {"tool_calls": [{"index", "id", "type", "function": {"name", "arguments": ""}}]}   a call's header
//   {"tool_calls": [{"index", "function": {"arguments": "..."}}]}                      argument fragments
#pragma once
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"

namespace clover::server {

using json = nlohmann::ordered_json;

struct ChatOutputOptions {
  bool parse = true;                // false (--reasoning-format none): raw text in content, no parsing
  bool parallel_tool_calls = true;  // false: calls after the first are dropped
  chat::ParserOptions parser;
};

class ChatOutput {
 public:
  explicit ChatOutput(ChatOutputOptions opt);

  std::vector<json> push(std::string_view text);
  std::vector<json> finish();
  // The parser's events with the options applied: calls after the first dropped without
  // parallel_tool_calls; without parsing, all the text as content.
  std::vector<chat::StreamEvent> push_events(std::string_view text);
  std::vector<chat::StreamEvent> finish_events();
  bool has_tool_calls() const;
  // {"role":"assistant","content":...,"reasoning_content":...,"reasoning":...,"tool_calls":[...]}
  json message() const;

 private:
  std::vector<json> deltas(const std::vector<chat::StreamEvent>& evs) const;
  std::vector<chat::StreamEvent> options_applied(std::vector<chat::StreamEvent> evs) const;

  ChatOutputOptions opt_;
  chat::StreamParser parser_;
  std::string raw_;  // everything pushed (for parse = false)
};

}  // namespace clover::server
