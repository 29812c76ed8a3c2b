// `clover serve`: an OpenAI-compatible HTTP server over the engine API (see docs/server.md).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "clover/clover.h"

namespace clover::server {

struct ServerOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (printed on start)
  std::string alias;              // model name clients use; default: the file name without .gguf
  int n_ctx = 0;                  // tokens per slot; 0: the engine's default
  int n_slots = 4;
  int max_queue = 64;             // requests waiting for a slot before answering 503
  int n_threads = 0;
  std::string device = "auto";    // --device (EngineOptions::device)
  int n_gpu_layers = -1;          // -ngl
  CacheType cache_type_k = CacheType::F16, cache_type_v = CacheType::F16;  // -ctk / -ctv
  std::string api_key;            // empty: no authentication
  DecodeMode mode = DecodeMode::AR;
  float threshold = -1.0f;
  std::string chat_template_file;  // empty: the model's template
  bool parse_reasoning = true;     // --reasoning-format deepseek (true) or none
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool metrics = false;
  bool webui = true;               // the web page at / (--no-webui: off)
  int header_timeout_s = 10;       // request line + headers must arrive within this (408 after)
  int body_timeout_s = 30;         // the body, from the end of the headers (408 after)
};

// Listens, loads the model in the background (/health answers 503 until it is ready), serves until
// SIGINT or SIGTERM. Returns the process exit code.
int run_server(const ServerOptions& opt);

}  // namespace clover::server
