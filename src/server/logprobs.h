// The engine's per-token log-probabilities (GenerateOptions::logprobs) in OpenAI's two shapes:
// chat completions' {"content": [{token, logprob, bytes, top_logprobs}]} and legacy completions'
// {tokens, token_logprobs, top_logprobs, text_offset}. Token strings are the token's bytes (a
// token that ends inside a UTF-8 character shows U+FFFD once dumped; `bytes` keeps the truth).
// Internal to src/server.
#pragma once
#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "clover/clover.h"

namespace clover::server {

using json = nlohmann::ordered_json;

// The entries of choices[i].logprobs.content, one per token.
json chat_logprobs_content(const Engine& engine, const std::vector<TokenLogprobs>& tokens);

// choices[i].logprobs of /v1/completions; `text_offset`: the offset in the completion's text of the
// first token, advanced past the tokens' bytes (a stream continues where the last chunk ended).
json completion_logprobs(const Engine& engine, const std::vector<TokenLogprobs>& tokens, size_t& text_offset);

}  // namespace clover::server
