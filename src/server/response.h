// Response bodies and SSE framing for the OpenAI endpoints, plus llama.cpp's `timings`.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "clover/clover.h"

namespace clover::server {

using json = nlohmann::ordered_json;

struct ResponseMeta {
  std::string id;       // chatcmpl-... / cmpl-...
  int64_t created = 0;  // unix seconds
  std::string model;
};
ResponseMeta new_meta(const char* id_prefix, std::string model);
// `prefix` followed by 24 random letters and digits (response, item and message ids).
std::string random_id(std::string_view prefix);

// "data: <json>\n\n" (invalid UTF-8 replaced, never thrown on).
std::string sse(const json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
std::string dump(const json& j);

// usage: prompt (including the cached prefix), completion and total tokens, cached tokens.
json usage_json(const GenerateStats& s, int prompt_tokens);
// timings: prompt_n/ms/per_second (new tokens only), predicted_*, cache_n, passes, tokens per pass.
json timings_json(const GenerateStats& s);
// stop / length / tool_calls
const char* finish_reason(FinishReason f, bool tool_calls);

json chat_chunk(const ResponseMeta& m, json delta, json finish = nullptr);
json chat_completion(const ResponseMeta& m, json message, const char* finish, json usage, json timings);
json usage_chunk(const ResponseMeta& m, const char* object, json usage);

json text_chunk(const ResponseMeta& m, const std::string& text, json finish = nullptr);
json text_completion(const ResponseMeta& m, const std::string& text, const char* finish, json usage, json timings);

}  // namespace clover::server
