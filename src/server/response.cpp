#include "server/response.h"

#include <chrono>
#include <random>

namespace clover::server {

std::string random_id(std::string_view prefix) {
  static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += alnum[rng() % (sizeof(alnum) - 1)];
  return id;
}

ResponseMeta new_meta(const char* id_prefix, std::string model) {
  ResponseMeta m;
  m.id = random_id(id_prefix);
  m.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  m.model = std::move(model);
  return m;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

json usage_json(const GenerateStats& s, int prompt_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", s.generated_tokens},
          {"total_tokens", prompt_tokens + s.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", s.cached_tokens}}}};
}

json timings_json(const GenerateStats& s) {
  const double pms = s.prompt_seconds * 1e3, gms = s.generate_seconds * 1e3;
  json t = {{"cache_n", s.cached_tokens},
            {"prompt_n", s.prompt_tokens},
            {"prompt_ms", pms},
            {"prompt_per_token_ms", s.prompt_tokens > 0 ? pms / s.prompt_tokens : 0.0},
            {"prompt_per_second", s.prompt_seconds > 0 ? s.prompt_tokens / s.prompt_seconds : 0.0},
            {"predicted_n", s.generated_tokens},
            {"predicted_ms", gms},
            {"predicted_per_token_ms", s.generated_tokens > 0 ? gms / s.generated_tokens : 0.0},
            {"predicted_per_second", s.generate_seconds > 0 ? s.generated_tokens / s.generate_seconds : 0.0},
            {"passes", s.passes},
            {"tokens_per_pass", s.passes > 0 ? static_cast<double>(s.generated_tokens) / s.passes : 0.0}};
  if (s.blocks > 0 || s.denoise_passes > 0) {
    t["denoise_passes"] = s.denoise_passes;
    t["blocks"] = s.blocks;
    t["passes_per_block"] = s.blocks > 0 ? static_cast<double>(s.denoise_passes) / s.blocks : 0.0;
    t["denoise_ms"] = s.denoise_seconds * 1e3;
  }
  return t;
}

const char* finish_reason(FinishReason f, bool tool_calls) {
  if (f == FinishReason::Length) return "length";
  return tool_calls ? "tool_calls" : "stop";
}

namespace {
json envelope(const ResponseMeta& m, const char* object) {
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}, {"system_fingerprint", "clover-0.1.0"}};
}
}  // namespace

json chat_chunk(const ResponseMeta& m, json delta, json finish) {
  json j = envelope(m, "chat.completion.chunk");
  j["choices"] = json::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", std::move(finish)}}});
  return j;
}

json chat_completion(const ResponseMeta& m, json message, const char* finish, json usage, json timings) {
  json j = envelope(m, "chat.completion");
  j["choices"] = json::array({{{"index", 0}, {"message", std::move(message)}, {"logprobs", nullptr}, {"finish_reason", finish}}});
  j["usage"] = std::move(usage);
  j["timings"] = std::move(timings);
  return j;
}

json usage_chunk(const ResponseMeta& m, const char* object, json usage) {
  json j = envelope(m, object);
  j["choices"] = json::array();
  j["usage"] = std::move(usage);
  return j;
}

json text_chunk(const ResponseMeta& m, const std::string& text, json finish) {
  json j = envelope(m, "text_completion");
  j["choices"] = json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", std::move(finish)}}});
  return j;
}

json text_completion(const ResponseMeta& m, const std::string& text, const char* finish, json usage, json timings) {
  json j = envelope(m, "text_completion");
  j["choices"] = json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}}});
  j["usage"] = std::move(usage);
  j["timings"] = std::move(timings);
  return j;
}

}  // namespace clover::server
