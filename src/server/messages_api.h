// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API, on the chat pipeline.
// A request is translated into a chat-completions body (system, content blocks -> messages;
// tool_use / tool_result -> tool calls and tool messages; thinking -> the thinking switch) and
// checked by the chat request parser; the chat layer's parsed output is shaped into content
// blocks (thinking, text, tool_use), whole or as Anthropic's `event:` stream. Errors use
// Anthropic's shape: {"type":"error","error":{"type","message"}}. Internal to src/server.
#pragma once
#include <httplib.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "server/api_error.h"
#include "server/server_state.h"

namespace clover::server {

using json = nlohmann::ordered_json;

void handle_messages(ServerState& st, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(ServerState& st, const httplib::Request& req, httplib::Response& res);

// An error in Anthropic's shape (the HTTP status stays the error's).
json anthropic_error_body(const ApiError& e);

// The chat-completions body a Messages request amounts to; 400 (naming the Messages field) for
// what it cannot express. `count_only`: for count_tokens, where max_tokens is not required.
json messages_to_chat(const json& body, bool count_only = false);

// Builds the content blocks from the chat layer's events, and the stream events that build them
// (content_block_start / _delta / _stop, each a JSON object with its "type").
class MessagesOutput {
 public:
  std::vector<json> push(const std::vector<chat::StreamEvent>& evs);
  std::vector<json> finish();  // closes the open block
  const json& blocks() const { return blocks_; }
  bool has_tool_use() const { return has_tool_use_; }

 private:
  enum class Open { None, Thinking, Text, ToolUse };
  void open(Open kind, const chat::StreamEvent& e, std::vector<json>& out);
  void close(std::vector<json>& out);

  json blocks_ = json::array();
  Open open_ = Open::None;
  size_t call_index_ = 0;
  std::string text_;  // the open block's text (or its input JSON)
  bool has_tool_use_ = false;
};

}  // namespace clover::server
