// llama-server's introspection endpoints: GET /props, GET /slots, POST /apply-template.
// Internal to src/server.
#pragma once
#include <httplib.h>

#include "server/server_state.h"

namespace clover::server {

// {"default_generation_settings": {"params": {...}, "n_ctx": N}, "total_slots", "model_alias",
//  "model_path", "modalities", "endpoint_slots", "endpoint_metrics", "webui", "chat_template",
//  "bos_token", "eos_token", "build_info"}
void handle_props(ServerState& st, const httplib::Request& req, httplib::Response& res);
// One entry per slot: id, id_task, n_ctx, is_processing, params, next_token; 501 with --no-slots;
// ?fail_on_no_slot=1 answers 503 when every slot is busy.
void handle_slots(ServerState& st, const httplib::Request& req, httplib::Response& res);
// A chat request's messages (with tools, chat_template_kwargs...) -> {"prompt": the rendered text}.
void handle_apply_template(ServerState& st, const httplib::Request& req, httplib::Response& res);

// CORS as llama-server does it: every response reflects the request's Origin (with credentials
// allowed); an OPTIONS preflight is answered 204, without an API key, with the allowed methods and
// the headers the browser asked for.
void register_cors(httplib::Server& http);

}  // namespace clover::server
