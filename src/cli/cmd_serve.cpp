// clover serve: the OpenAI-compatible HTTP server (src/server, docs/server.md).
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cache_options.h"
#include "cli/device_options.h"
#include "cli/commands.h"
#include "cli/ranges.h"
#include "clover/clover.h"
#include "server/server.h"

namespace clover::cli {

std::string default_model_path();

Runner add_serve_command(CLI::App& app) {
  struct Args {
    server::ServerOptions opt;
    std::string mode = "ar", reasoning_format = "deepseek", kwargs;
    bool jinja = true;
    std::string cache_type_k = "f16", cache_type_v = "f16";
    DeviceArgs dev;
  };
  auto a = std::make_shared<Args>();
  server::ServerOptions& o = a->opt;
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  c->add_option("-m,--model", o.model_path, "GGUF model file (default: the shipped model)");
  c->add_option("--host", o.host, "address to listen on")->capture_default_str();
  c->add_option("--port", o.port, "port (0: any free port, printed on start)")->capture_default_str();
  c->add_option("-a,--alias", o.alias, "model name for clients (default: the file name without .gguf)");
  c->add_option("-c,--ctx-size", o.n_ctx, "context size per slot in tokens (0: the model's, at most 131072)")
      ->check(in_range(0, kMaxContext));
  add_cache_type_options(c, a->cache_type_k, a->cache_type_v);
  add_device_options(c, a->dev);
  c->add_option("--parallel", o.n_slots, "slots: sessions kept with their own cache")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  c->add_option("--max-queue", o.max_queue, "requests allowed to wait for a slot before answering 503")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  CLI::Option* api_key = c->add_option("--api-key", o.api_key, "require this key (Authorization: Bearer KEY)");
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
  c->add_option("--reasoning-format", a->reasoning_format,
                "deepseek: reasoning in message.reasoning_content; none: raw output in content, unparsed")
      ->check(CLI::IsMember({"deepseek", "none"}))
      ->capture_default_str();
  c->add_option("--chat-template-kwargs", a->kwargs, "JSON object of default template variables, e.g. '{\"enable_thinking\":false}'");
  c->add_flag("--metrics", o.metrics, "serve Prometheus metrics at /metrics");
  c->add_flag("!--no-webui", o.webui, "do not serve the web page at /");
  c->add_option("-t,--threads", o.n_threads, "threads (0: all cores)")->check(in_range(0, kMaxThreads));
  c->add_flag("--jinja", a->jinja, "accepted for llama-server compatibility (templates are always Jinja)");
  return [a, api_key]() -> int {
    server::ServerOptions opt = a->opt;
    // An empty key would silently turn authentication off: whoever wrote --api-key meant it on.
    if (api_key->count() > 0 && opt.api_key.empty()) throw Error("--api-key must not be empty (leave the option out to serve without a key)");
    if (opt.model_path.empty()) opt.model_path = default_model_path();
    opt.mode = a->mode == "diffusion" ? DecodeMode::Diffusion : a->mode == "spec" ? DecodeMode::Spec : DecodeMode::AR;
    opt.parse_reasoning = a->reasoning_format == "deepseek";
    opt.cache_type_k = cache_type_from_name(a->cache_type_k);
    opt.cache_type_v = cache_type_from_name(a->cache_type_v);
    EngineOptions device;
    apply_device_options(a->dev, device);
    opt.device = device.device;
    opt.n_gpu_layers = device.n_gpu_layers;
    if (!a->kwargs.empty()) {
      opt.chat_template_kwargs = nlohmann::ordered_json::parse(a->kwargs, nullptr, false);
      if (!opt.chat_template_kwargs.is_object()) throw Error("--chat-template-kwargs must be a JSON object");
    }
    return server::run_server(opt);
  };
}

}  // namespace clover::cli
