// Pass events: an extension that streams every denoising pass of a chat completion, for drawing
// blocks as they fill in (the web page, docs/server.md "Pass events"). Opt-in per request with
// "clover": {"pass_events": true}. Each pass goes out as an ordinary chat.completion.chunk whose
// delta is empty and whose top-level "pass_event" object describes the pass, so a client that
// reads only choices[0].delta sees exactly the text it sees with the option off.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "clover/clover.h"
#include "server/response.h"

namespace clover::server {

// The request's clover.pass_events (absent or null: false). 400 unless a boolean, and when set on a
// request that does not stream: the passes only exist as chunks.
bool parse_pass_events(const json& body, bool stream);

// BlockEvent -> the "pass_event" object. Keeps which positions of the current block were already
// sent, so each pass lists only the positions it committed.
class PassEncoder {
 public:
  PassEncoder(const Engine& engine, DecodeMode mode) : engine_(engine), mode_(mode) {}
  json encode(const BlockEvent& b);

 private:
  const Engine& engine_;
  DecodeMode mode_;
  int block_ = -1;
  std::vector<bool> sent_;  // positions of block_ already listed as committed
};

// The chunk that carries one pass: no choice text, the pass at the top level.
json pass_chunk(const ResponseMeta& meta, json pass_event);

}  // namespace clover::server
