// POST /v1/responses: OpenAI's Responses API, on the chat pipeline. A request is translated into a
// chat-completions body (input items -> messages, function tools -> tools, reasoning.effort ->
// the thinking switch) and checked by the chat request parser; the chat layer's parsed output is
// shaped into output items (reasoning, message, function_call), whole or as typed SSE events.
// Stateless: previous_response_id and the other server-side state are refused, `store` is ignored.
// Internal to src/server.
#pragma once
#include <httplib.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "server/server_state.h"

namespace clover::server {

using json = nlohmann::ordered_json;

void handle_responses(ServerState& st, const httplib::Request& req, httplib::Response& res);

// The chat-completions body a Responses request amounts to; 400 (naming the Responses field) for
// what it cannot express.
json responses_to_chat(const json& body);

// Builds the output items from the chat layer's events, and the typed stream events that build
// them (each a JSON object with its "type"; the caller numbers and frames them).
//
// With logprobs (a renderer set: the request's include or top_logprobs), the message's output_text
// carries the entries of the tokens its text came from, and each output_text.delta those of its
// own tokens. push() takes the tokens of the text it is given (the engine emits one token per
// event); a token whose text the parser holds back (a possible tag) waits for what the text
// becomes: text of a message that is already open, the token joins it; a tag, reasoning or a tool
// call, it is dropped; when a push opens the message, only that push's own tokens are the
// message's (the ones before it carried the tag or the whitespace that ended the reasoning).
class ResponsesOutput {
 public:
  using RenderLogprobs = std::function<json(const std::vector<TokenLogprobs>&)>;
  explicit ResponsesOutput(RenderLogprobs logprobs = {}) : render_(std::move(logprobs)) {}

  std::vector<json> push(const std::vector<chat::StreamEvent>& evs, const std::vector<TokenLogprobs>& tokens = {});
  std::vector<json> finish();  // closes the open item
  const json& items() const { return items_; }
  const std::string& reasoning() const { return reasoning_; }

 private:
  enum class Open { None, Reasoning, Message, Call };
  void open(Open kind, const chat::StreamEvent& e, std::vector<json>& out);
  void close(std::vector<json>& out);

  json items_ = json::array();
  Open open_ = Open::None;
  size_t call_index_ = 0;  // the open call's parser index
  std::string text_;       // the open item's text (reasoning, message text or arguments)
  std::string reasoning_;  // all reasoning (for the reasoning token count)
  RenderLogprobs render_;                 // empty: no logprobs
  std::vector<TokenLogprobs> pending_;    // tokens whose text has not come out of the parser yet
  json message_logprobs_ = json::array();  // the open message's entries
};

}  // namespace clover::server
