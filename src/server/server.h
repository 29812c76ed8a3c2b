// `clover serve`: an OpenAI-compatible HTTP server over the engine API (see docs/server.md).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clover/clover.h"

namespace clover::server {

struct ServerOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (printed on start)
  std::vector<std::string> aliases;  // model names clients use (the first is reported); default: the file name without .gguf
  int n_ctx = 0;                  // tokens per slot; 0: the engine's default
  int n_slots = 4;
  int max_queue = 64;             // requests waiting for a slot before answering 503
  int n_threads = 0;
  std::string device = "auto";    // --device (EngineOptions::device)
  int n_gpu_layers = -1;          // -ngl
  bool cpu_moe = false;           // --cpu-moe, --n-cpu-moe, -ot, --vram-budget (EngineOptions)
  int n_cpu_moe = 0;
  std::vector<std::string> override_tensor;
  std::string vram_budget;
  int stream_experts = -1;        // --stream-experts N (EngineOptions)
  bool mmap = true, repack = true, mlock = false;  // --no-mmap, --no-repack, --mlock (EngineOptions)
  Prefault prefault = Prefault::Background;  // --prefault: /health and /metrics report its progress
  CacheType cache_type_k = CacheType::F16, cache_type_v = CacheType::F16;  // -ctk / -ctv
  std::vector<std::string> api_keys;  // any of them is accepted; empty: no authentication
  DecodeMode mode = DecodeMode::AR;
  float threshold = -1.0f;
  std::string chat_template_file;  // empty: the model's template
  bool parse_reasoning = true;     // --reasoning-format deepseek (true) or none
  // --special-in-content: control-token text in a request's messages becomes control tokens
  // (llama.cpp's behaviour); by default it is tokenised as plain text.
  bool special_in_content = false;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // Server-wide request defaults (a request's own fields beat them), llama-server's values.
  SamplingOptions sampling = [] {
    SamplingOptions s;
    s.temperature = 0.8f;
    s.top_k = 40;
    s.top_p = 0.95f;
    s.min_p = 0.05f;
    return s;
  }();
  int64_t seed = -1;                // -1: a random seed per request
  int n_predict = -1;               // default max_tokens; -1: up to the end of the context
  int reasoning_budget = -1;        // thinking tokens before </think> is forced; -1: unlimited
  std::string reasoning_budget_message;  // written before the forced </think>
  bool metrics = false;
  bool slots = true;               // GET /slots (--no-slots: 501)
  bool webui = true;               // the web page at / (--no-webui: off)
  int header_timeout_s = 10;       // request line + headers must arrive within this (408 after)
  int body_timeout_s = 30;         // the body, from the end of the headers (408 after)
};

// Listens, loads the model in the background (/health answers 503 until it is ready), serves until
// SIGINT or SIGTERM. Returns the process exit code.
int run_server(const ServerOptions& opt);

}  // namespace clover::server
