// The generation endpoints: POST /v1/chat/completions and /v1/completions, streaming or not.
// Internal to src/server.
#pragma once
#include <httplib.h>

#include "server/server_state.h"

namespace clover::server {

void handle_chat_completions(ServerState& st, const httplib::Request& req, httplib::Response& res);
void handle_completions(ServerState& st, const httplib::Request& req, httplib::Response& res);

// 404 unless `requested` is empty or names the served model (alias, path, file name or stem).
void check_model(const ServerState& st, const std::string& requested);

}  // namespace clover::server
