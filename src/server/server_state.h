// What the HTTP handlers share: the options, the model once loaded, the scheduler and metrics.
// Internal to src/server.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "clover/clover.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "server/server.h"

namespace httplib {
class Server;
}

namespace clover::server {

struct ServerState {
  ServerOptions opt;
  std::string model_name;  // the alias, or the file name without .gguf
  RequestDefaults defaults;
  Metrics metrics;

  // Set by the loader thread, then read-only; `ready` publishes them.
  std::unique_ptr<Engine> engine;
  std::unique_ptr<chat::ChatTemplate> chat_template;
  std::string chat_template_source;
  std::unique_ptr<Scheduler> scheduler;
  size_t max_token_bytes = 0;  // the longest token's text: a prompt has at least bytes / this tokens
  std::atomic<bool> ready{false};
};

void register_routes(httplib::Server& http, ServerState& st);

}  // namespace clover::server
