#include "server/logprobs.h"

#include <algorithm>
#include <string>

namespace clover::server {

namespace {

// JSON has no -inf: OpenAI reports tokens the model rules out as -9999.
double finite_logprob(double lp) { return std::max(lp, -9999.0); }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

json chat_logprobs_content(const Engine& engine, const std::vector<TokenLogprobs>& tokens) {
  json content = json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string text = engine.token_text(t.token);
    json top = json::array();
    for (const TopToken& a : t.top) {
      const std::string at = engine.token_text(a.token);
      top.push_back({{"token", at}, {"logprob", finite_logprob(a.logprob)}, {"bytes", bytes_of(at)}});
    }
    content.push_back({{"token", text}, {"logprob", finite_logprob(t.logprob)}, {"bytes", bytes_of(text)}, {"top_logprobs", std::move(top)}});
  }
  return content;
}

json completion_logprobs(const Engine& engine, const std::vector<TokenLogprobs>& tokens, size_t& text_offset) {
  json strs = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string text = engine.token_text(t.token);
    strs.push_back(text);
    lps.push_back(finite_logprob(t.logprob));
    json top = json::object();
    for (const TopToken& a : t.top) top[engine.token_text(a.token)] = finite_logprob(a.logprob);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return {{"tokens", std::move(strs)}, {"token_logprobs", std::move(lps)}, {"top_logprobs", std::move(tops)}, {"text_offset", std::move(offsets)}};
}

}  // namespace clover::server
