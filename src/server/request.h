// OpenAI request bodies -> what the scheduler and the chat layer need, with every field checked.
// A wrong type or value is an ApiError 400 naming the field; unknown fields are ignored (clients
// send many), null means absent.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "clover/clover.h"

namespace clover::server {

using json = nlohmann::ordered_json;

// Server-wide defaults (command-line options) that a request may override.
struct RequestDefaults {
  DecodeMode mode = DecodeMode::AR;
  float threshold = -1.0f;
  json chat_template_kwargs = json::object();
  SamplingOptions sampling = [] {
    SamplingOptions s;  // llama-server's defaults
    s.temperature = 0.8f;
    s.top_k = 40;
    s.top_p = 0.95f;
    s.min_p = 0.05f;
    return s;
  }();
  int64_t seed = -1;          // -1: a random seed per request
  int n_predict = -1;         // max_tokens when the request gives none; -1: up to the end of the context
  int reasoning_budget = -1;  // thinking tokens allowed; -1: unlimited
  int n_vocab = 0;            // the model's, for logit_bias keys; 0: not checked here (the engine does)
};

struct CompletionRequest {
  std::string model;  // empty when the client did not name one
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool max_tokens_given = false;
  GenerateOptions gen;

  // /v1/chat/completions
  chat::ChatRequest chat;
  bool parse_tools = true;          // tool_choice != "none"
  bool parallel_tool_calls = true;
  bool pass_events = false;         // extension: stream every denoising pass (server/pass_events.h)
  int reasoning_budget = -1;        // reasoning_budget / thinking_budget_tokens; -1: unlimited

  // /v1/completions
  std::string prompt;
  std::vector<int32_t> prompt_tokens;  // the prompt given as token ids
  bool return_tokens = false;          // extension (both endpoints): echo the generated token ids
};

// Parses a request body; 400 when it is not a JSON object.
json parse_body(const std::string& body);

CompletionRequest parse_chat_request(const json& body, const RequestDefaults& d);
CompletionRequest parse_completion_request(const json& body, const RequestDefaults& d, int n_vocab);

// Token ids for /detokenize and token-array prompts: integers in [0, n_vocab).
std::vector<int32_t> parse_token_ids(const json& v, const char* field, int n_vocab);

}  // namespace clover::server
