#include "server/pass_events.h"

#include "server/api_error.h"

namespace clover::server {

bool parse_pass_events(const json& body, bool stream) {
  // parse_chat_request has checked that "clover", when present, is an object.
  const auto c = body.find("clover");
  if (c == body.end() || !c->is_object()) return false;
  const auto it = c->find("pass_events");
  if (it == c->end() || it->is_null()) return false;
  if (!it->is_boolean()) throw bad_request("'clover.pass_events' must be a boolean", "clover.pass_events");
  if (it->get<bool>() && !stream)
    throw bad_request("'clover.pass_events' needs \"stream\": true (the passes are sent as stream chunks)", "clover.pass_events");
  return it->get<bool>();
}

json PassEncoder::encode(const BlockEvent& b) {
  const size_t n = b.tokens.size();
  const bool verify = b.accepted >= 0;
  // A new block starts with its first denoising pass (spec: with the draft, not the verify pass).
  if (b.block != block_ || (b.pass == 1 && !verify) || sent_.size() != n) {
    block_ = b.block;
    sent_.assign(n, false);
  }
  json committed = json::array(), masked = json::array();
  json end = nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (!b.decided[i]) {
      masked.push_back(i);
      continue;
    }
    if (end.is_null() && engine_.is_end_token(b.tokens[i])) end = i;
    if (sent_[i]) continue;
    sent_[i] = true;
    const float c = i < b.confidence.size() ? b.confidence[i] : 0.0f;
    // Position 0 (the pending token) was chosen before the block: its confidence is not known.
    committed.push_back({{"pos", i},
                         {"token", b.tokens[i]},
                         {"text", engine_.token_text(b.tokens[i])},
                         {"confidence", c > 0 ? json(c) : json(nullptr)}});
  }
  const char* kind = mode_ != DecodeMode::Spec ? "denoise" : verify ? "verify" : "draft";
  json ev = {{"block", b.block}, {"pass", b.pass},       {"kind", kind},         {"size", n},
             {"committed", std::move(committed)},       {"masked", std::move(masked)}, {"end", end}};
  if (verify) ev["accepted"] = b.accepted;
  return ev;
}

json pass_chunk(const ResponseMeta& meta, json pass_event) {
  json c = chat_chunk(meta, json::object());
  c["pass_event"] = std::move(pass_event);
  return c;
}

}  // namespace clover::server
