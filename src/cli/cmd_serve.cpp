// clover serve: the OpenAI-compatible HTTP server (src/server, docs/server.md).
#include <nlohmann/json.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cache_options.h"
#include "cli/device_options.h"
#include "cli/load_options.h"
#include "cli/commands.h"
#include "cli/env_args.h"
#include "cli/ranges.h"
#include "cli/sampling_flags.h"
#include "clover/clover.h"
#include "server/server.h"

namespace clover::cli {

std::string default_model_path();

namespace {

// "a,b,,c" -> {"a", "b", "", "c"}
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t comma; (comma = s.find(',', from)) != std::string::npos; from = comma + 1) out.push_back(s.substr(from, comma - from));
  out.push_back(s.substr(from));
  return out;
}

// --api-key-file: one key per line (blank lines skipped, surrounding whitespace dropped).
std::vector<std::string> read_key_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error("--api-key-file: cannot open " + path);
  std::vector<std::string> keys;
  for (std::string line; std::getline(f, line);) {
    const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos) keys.push_back(line.substr(b, e - b + 1));
  }
  if (keys.empty()) throw Error("--api-key-file: " + path + " holds no key (one key per line)");
  return keys;
}

}  // namespace

Runner add_serve_command(CLI::App& app) {
  struct Args {
    server::ServerOptions opt;
    std::string mode = "ar", reasoning_format = "deepseek", reasoning = "auto", kwargs;
    std::string aliases, api_keys, api_key_file;
    bool jinja = true;
    std::string cache_type_k = "f16", cache_type_v = "f16";
    DeviceArgs dev;
    LoadArgs load;
  };
  auto a = std::make_shared<Args>();
  server::ServerOptions& o = a->opt;
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  c->add_option("-m,--model", o.model_path, "GGUF model file (default: the shipped model)");
  c->add_option("--host", o.host, "address to listen on")->capture_default_str();
  c->add_option("--port", o.port, "port (0: any free port, printed on start)")->capture_default_str();
  c->add_option("-a,--alias", a->aliases, "model names for clients, comma-separated; the first is reported (default: the file name without .gguf)");
  c->add_option("-c,--ctx-size", o.n_ctx, "context size per slot in tokens (0: the model's, at most 131072)")
      ->check(in_range(0, kMaxContext));
  add_cache_type_options(c, a->cache_type_k, a->cache_type_v);
  add_device_options(c, a->dev);
  add_load_options(c, a->load);
  c->add_option("--parallel", o.n_slots, "slots: sessions kept with their own cache")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  c->add_option("--max-queue", o.max_queue, "requests allowed to wait for a slot before answering 503")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  CLI::Option* api_key = c->add_option("--api-key", a->api_keys, "require one of these keys, comma-separated (Authorization: Bearer KEY)");
  c->add_option("--api-key-file", a->api_key_file, "file of accepted API keys, one per line (adds to --api-key)");
  c->add_option("--header-timeout", o.header_timeout_s, "seconds a request line and headers may take to arrive (408 after)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  c->add_option("--body-timeout", o.body_timeout_s, "seconds a request body may take to arrive after its headers (408 after)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  c->add_option("--mode", a->mode, "default decoding mode")->check(CLI::IsMember({"ar", "diffusion", "spec"}))->capture_default_str();
  c->add_option("--threshold", o.threshold, "default diffusion confidence threshold (default: the model's)")
      ->check(in_range(0, 1, /*lo_open=*/true));
  c->add_option("--chat-template-file", o.chat_template_file, "Jinja chat template to use instead of the model's");
  c->add_flag("--special-in-content", o.special_in_content,
              "read control-token text in messages (\"<|im_end|>\") as control tokens, as llama.cpp does; by default it "
              "is plain text and only the chat template writes control tokens");
  c->add_option("--reasoning-format", a->reasoning_format,
                "deepseek (or auto): reasoning in message.reasoning_content; none: raw output in content, unparsed")
      ->check(CLI::IsMember({"deepseek", "none", "auto"}))
      ->capture_default_str();
  c->add_option("--reasoning", a->reasoning, "thinking: on, off or auto (the template's default); -rea")
      ->check(CLI::IsMember({"on", "off", "auto"}))->capture_default_str();
  c->add_option("--reasoning-budget", o.reasoning_budget, "thinking tokens before </think> is forced (-1: unlimited, 0: none)")
      ->check(in_range(-1, 1e9))->capture_default_str();
  c->add_option("--reasoning-budget-message", o.reasoning_budget_message, "text written before the forced </think>");
  add_sampling_options(c, o.sampling, o.seed);
  c->add_option("-n,--n-predict", o.n_predict, "default max_tokens of a request (-1: up to the end of the context)")
      ->check(in_range(-1, kMaxContext))->capture_default_str();
  c->add_option("--chat-template-kwargs", a->kwargs, "JSON object of default template variables, e.g. '{\"enable_thinking\":false}'");
  c->add_flag("--metrics", o.metrics, "serve Prometheus metrics at /metrics");
  c->add_flag("--webui,!--no-webui", o.webui, "serve the web page at / (default: on)");
  c->add_flag("--slots,!--no-slots", o.slots, "serve the slot monitor at /slots (default: on)");
  c->add_option("-t,--threads", o.n_threads, "threads (0: all cores)")->check(in_range(0, kMaxThreads));
  c->add_flag("--jinja", a->jinja, "accepted for llama-server compatibility (templates are always Jinja)");
  add_env_args(c);
  return [a, api_key]() -> int {
    server::ServerOptions opt = a->opt;
    if (api_key->count() > 0) {
      // An empty key would silently turn authentication off: whoever wrote --api-key meant it on.
      if (a->api_keys.empty()) throw Error("--api-key must not be empty (leave the option out to serve without a key)");
      const auto keys = split_commas(a->api_keys);
      for (size_t i = 0; i < keys.size(); ++i)
        if (keys[i].empty())
          throw Error("--api-key: key " + std::to_string(i + 1) + " of " + std::to_string(keys.size()) + " is empty");
      opt.api_keys = keys;
    }
    if (!a->api_key_file.empty())
      for (auto& k : read_key_file(a->api_key_file)) opt.api_keys.push_back(std::move(k));
    if (!a->aliases.empty()) {
      opt.aliases = split_commas(a->aliases);
      for (const auto& al : opt.aliases)
        if (al.empty()) throw Error("--alias: an alias is empty (got \"" + a->aliases + "\")");
    }
    if (opt.model_path.empty()) opt.model_path = default_model_path();
    opt.mode = a->mode == "diffusion" ? DecodeMode::Diffusion : a->mode == "spec" ? DecodeMode::Spec : DecodeMode::AR;
    opt.parse_reasoning = a->reasoning_format != "none";
    opt.cache_type_k = cache_type_from_name(a->cache_type_k);
    opt.cache_type_v = cache_type_from_name(a->cache_type_v);
    EngineOptions device;
    apply_device_options(a->dev, device);
    opt.device = device.device;
    opt.n_gpu_layers = device.n_gpu_layers;
    opt.cpu_moe = device.cpu_moe;
    opt.n_cpu_moe = device.n_cpu_moe;
    opt.stream_experts = device.stream_experts;
    opt.override_tensor = device.override_tensor;
    opt.vram_budget = device.vram_budget;
    opt.mmap = !a->load.no_mmap;
    opt.repack = !a->load.no_repack;
    opt.mlock = a->load.mlock;
    opt.prefault = prefault_from_name(a->load.prefault);
    if (!a->kwargs.empty()) {
      opt.chat_template_kwargs = nlohmann::ordered_json::parse(a->kwargs, nullptr, false);
      if (!opt.chat_template_kwargs.is_object()) throw Error("--chat-template-kwargs must be a JSON object");
    }
    if (a->reasoning != "auto") {
      const bool on = a->reasoning == "on";
      const auto& k = opt.chat_template_kwargs;
      if (k.contains("enable_thinking") && k["enable_thinking"] != on)
        throw Error("--reasoning " + a->reasoning + " contradicts --chat-template-kwargs' enable_thinking: " + k["enable_thinking"].dump());
      opt.chat_template_kwargs["enable_thinking"] = on;
    }
    return server::run_server(opt);
  };
}

}  // namespace clover::cli
