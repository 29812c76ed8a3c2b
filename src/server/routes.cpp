// Route table, authentication, readiness, error mapping and the small endpoints (/health,
// /v1/models, /metrics, /tokenize, /detokenize).
#include <httplib.h>

#include <cctype>
#include <string_view>

#include "server/handlers.h"
#include "server/http_server.h"
#include "server/messages_api.h"
#include "server/props.h"
#include "server/response.h"
#include "server/responses_api.h"
#include "server/server_state.h"
#include "server/webui.h"

namespace clover::server {

namespace {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

using ErrorBody = json (*)(const ApiError&);

void send_error(httplib::Response& res, const ApiError& e, ErrorBody body = nullptr) {
  res.status = e.status;
  res.set_content(dump(body ? body(e) : e.body()), "application/json");
}

void send_json(httplib::Response& res, const json& j) { res.set_content(dump(j), "application/json"); }

// Compares in a time that depends on the key's length only, never on where the two first differ
// (a `!=` returns at the first wrong byte, which lets a client find the key byte by byte).
bool equal_constant_time(std::string_view given, std::string_view key) {
  unsigned diff = given.size() != key.size() ? 1u : 0u;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(i < given.size() ? given[i] : 0) ^ static_cast<unsigned char>(key[i]);
  return diff == 0;
}

bool ascii_iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

void check_api_key(const ServerState& st, const httplib::Request& req) {
  if (st.opt.api_keys.empty()) return;
  std::string key;
  const std::string auth = req.get_header_value("Authorization");
  // The scheme is case-insensitive (RFC 9110, 11.1): "Bearer", "bearer" and "BEARER" are one.
  const size_t sp = auth.find(' ');
  if (sp != std::string::npos && ascii_iequal(std::string_view(auth).substr(0, sp), "bearer")) {
    const size_t b = auth.find_first_not_of(' ', sp);
    if (b != std::string::npos) key = auth.substr(b);
  } else if (req.has_header("X-Api-Key")) {
    key = req.get_header_value("X-Api-Key");
  }
  if (key.empty())
    throw ApiError(401, "authentication_error", "missing API key: send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'");
  bool valid = false;
  for (const auto& k : st.opt.api_keys) valid |= equal_constant_time(key, k);  // no early exit: the same time for every key
  if (!valid) throw ApiError(401, "authentication_error", "invalid API key");
}

struct RouteFlags {
  bool auth = true;        // needs the API key
  bool needs_model = true; // 503 while loading
  ErrorBody error_body = nullptr;  // the API's error shape (null: OpenAI's)
};

// Every handler runs inside this: authentication, readiness, ApiError -> its status, anything
// else -> 500 (a server bug, never the client's input), and the request counter.
Handler wrap(ServerState& st, std::string endpoint, RouteFlags flags, Handler h) {
  return [&st, endpoint = std::move(endpoint), flags, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    try {
      if (flags.auth) check_api_key(st, req);
      if (flags.needs_model && !st.ready.load()) throw unavailable("Loading model");
      h(req, res);
    } catch (const ApiError& e) {
      send_error(res, e, flags.error_body);
    } catch (const std::exception& e) {
      send_error(res, server_error(e.what()), flags.error_body);
    }
    // A handler that set no status answers 200 (httplib fills it in only after this).
    st.metrics.request_done(endpoint, res.status == -1 ? 200 : res.status);
  };
}

// The pre-fault of the weights (EngineOptions::prefault): /health's "prefault" object.
json prefault_json(const PrefaultStatus& p) {
  return {{"state", prefault_state_name(p.state)}, {"done_bytes", p.done_bytes}, {"total_bytes", p.total_bytes}, {"seconds", p.seconds}};
}

// The same as Prometheus gauges, after the server's own metrics.
std::string prefault_metrics(const PrefaultStatus& p) {
  std::string o;
  auto gauge = [&o](const char* name, const char* help, const std::string& value) {
    o += std::string("# HELP clover_") + name + ' ' + help + "\n# TYPE clover_" + name + " gauge\nclover_" + name + ' ' + value + '\n';
  };
  gauge("prefault_bytes", "Weight bytes the pre-fault has brought into memory so far.", std::to_string(p.done_bytes));
  gauge("prefault_bytes_total", "Weight bytes the pre-fault walks (0: off).", std::to_string(p.state == PrefaultStatus::State::Off ? 0 : p.total_bytes));
  gauge("prefault_seconds", "Seconds the pre-fault has run, or took once done.", std::to_string(p.seconds));
  gauge("prefault_done", "1 once the pre-fault has walked every weight.", p.state == PrefaultStatus::State::Done ? "1" : "0");
  return o;
}

json model_entry(const ServerState& st) {
  json meta = json::object();
  if (st.ready.load()) {
    const ModelInfo& mi = st.engine->info();
    meta = {{"architecture", mi.architecture}, {"layout", mi.layout},         {"n_vocab", mi.n_vocab},
            {"n_ctx_train", mi.n_ctx_train},   {"n_ctx", st.scheduler->n_ctx()}, {"n_embd", mi.n_embd},
            {"n_params", mi.n_params},         {"size", mi.file_bytes},       {"can_denoise", mi.can_denoise}, {"device", mi.device},
            {"block_size", mi.block_size},     {"threshold", mi.threshold},   {"slots", st.scheduler->n_slots()}};
  }
  return {{"id", st.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "clover"}, {"meta", meta}};
}

}  // namespace

void register_routes(httplib::Server& http, ServerState& st) {
  const RouteFlags open{false, false}, authed{true, false}, model{true, true};

  auto health = wrap(st, "/health", open, [&st](const httplib::Request&, httplib::Response& res) {
    if (!st.ready.load()) throw unavailable("Loading model");
    send_json(res, {{"status", "ok"}, {"prefault", prefault_json(st.engine->prefault_status())}});
  });
  http.Get("/health", health);
  http.Get("/v1/health", health);

  auto models = wrap(st, "/v1/models", authed, [&st](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"object", "list"}, {"data", json::array({model_entry(st)})}});
  });
  http.Get("/v1/models", models);
  http.Get("/models", models);

  http.Get("/metrics", wrap(st, "/metrics", authed, [&st](const httplib::Request&, httplib::Response& res) {
    if (!st.opt.metrics)
      throw ApiError(501, "not_supported_error", "the metrics endpoint is off; start the server with --metrics");
    std::string text = st.metrics.prometheus();
    if (st.ready.load()) text += prefault_metrics(st.engine->prefault_status());
    res.set_content(text, "text/plain; version=0.0.4");
  }));

  auto chat = wrap(st, "/v1/chat/completions", model,
                   [&st](const httplib::Request& req, httplib::Response& res) { handle_chat_completions(st, req, res); });
  http.Post("/v1/chat/completions", chat);
  http.Post("/chat/completions", chat);
  auto completions = wrap(st, "/v1/completions", model,
                          [&st](const httplib::Request& req, httplib::Response& res) { handle_completions(st, req, res); });
  http.Post("/v1/completions", completions);
  http.Post("/completions", completions);
  auto responses = wrap(st, "/v1/responses", model,
                        [&st](const httplib::Request& req, httplib::Response& res) { handle_responses(st, req, res); });
  http.Post("/v1/responses", responses);
  http.Post("/responses", responses);
  const RouteFlags anthropic{true, true, &anthropic_error_body};
  http.Post("/v1/messages", wrap(st, "/v1/messages", anthropic,
                                 [&st](const httplib::Request& req, httplib::Response& res) { handle_messages(st, req, res); }));
  http.Post("/v1/messages/count_tokens", wrap(st, "/v1/messages/count_tokens", anthropic, [&st](const httplib::Request& req, httplib::Response& res) {
              handle_count_tokens(st, req, res);
            }));

  // {"content": "text", "with_pieces": false, "parse_special": true} -> {"tokens": [...]}
  http.Post("/tokenize", wrap(st, "/tokenize", model, [&st](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    if (!body.contains("content") || !body["content"].is_string())
      throw bad_request("'content' must be a string", "content");
    for (const char* f : {"with_pieces", "parse_special", "add_special"})
      if (body.contains(f) && !body[f].is_boolean()) throw bad_request(std::string("'") + f + "' must be a boolean", f);
    const auto ids = st.engine->tokenize(body["content"].get<std::string>(), body.value("parse_special", true));
    json tokens = json::array();
    if (body.value("with_pieces", false)) {
      for (int32_t id : ids) tokens.push_back({{"id", id}, {"piece", st.engine->token_text(id)}});
    } else {
      tokens = ids;
    }
    send_json(res, {{"tokens", std::move(tokens)}});
  }));

  // {"tokens": [...]} -> {"content": "text"}
  http.Post("/detokenize", wrap(st, "/detokenize", model, [&st](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    if (!body.contains("tokens")) throw bad_request("'tokens' is required", "tokens");
    const auto ids = parse_token_ids(body["tokens"], "tokens", st.engine->info().n_vocab);
    send_json(res, {{"content", st.engine->detokenize(ids)}});
  }));

  http.Get("/props", wrap(st, "/props", model, [&st](const httplib::Request& req, httplib::Response& res) { handle_props(st, req, res); }));
  http.Get("/slots", wrap(st, "/slots", model, [&st](const httplib::Request& req, httplib::Response& res) { handle_slots(st, req, res); }));
  auto apply_template = wrap(st, "/apply-template", model,
                             [&st](const httplib::Request& req, httplib::Response& res) { handle_apply_template(st, req, res); });
  http.Post("/apply-template", apply_template);
  register_cors(http);

  if (st.opt.webui) register_webui(http);

  // A reserve connection (every general thread was taken) serves health and metrics only.
  http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!HttpServer::current_is_reserve() || req.path == "/health" || req.path == "/v1/health" || req.path == "/metrics")
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, unavailable("the server is busy: every connection thread is taken; retry later"));
    return httplib::Server::HandlerResponse::Handled;
  });

  // Unknown paths and methods, and requests that could not be read, get an OpenAI-shaped error too.
  const auto* hs = dynamic_cast<const HttpServer*>(&http);
  const HttpLimits lim = hs ? hs->limits() : HttpLimits{};
  http.set_error_handler([lim](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // httplib answers 400 to any request it could not read; the connection loop knows why.
    switch (res.status == 400 ? HttpServer::current_read_failure() : ReadFailure::None) {
      case ReadFailure::Timeout:
        return send_error(res, ApiError(408, "timeout_error", "the request was not received in time"));
      case ReadFailure::HeadersTooLarge:
        return send_error(res, ApiError(431, "invalid_request_error", "the request line and headers are larger than " +
                                                                          std::to_string(lim.max_header_bytes >> 10) + " KiB (the limit)"));
      case ReadFailure::ControlByte:
        return send_error(res, bad_request("the request line or a header holds a NUL or another control byte"));
      case ReadFailure::None: break;
    }
    const int status = res.status;
    std::string message = "the request could not be handled (HTTP " + std::to_string(status) + ")";
    if (status == 404) message = "no such endpoint: " + req.method + " " + req.path;
    if (status == 413) {
      const bool form = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
      message = form ? "the request body is too large (a form-encoded body is limited to 8 KiB: send Content-Type: application/json)"
                     : "the request body is larger than " + std::to_string(lim.max_body_bytes >> 20) + " MiB (the limit)";
    }
    send_error(res, ApiError(status, status == 404 ? "not_found_error" : "invalid_request_error", message));
  });
}

}  // namespace clover::server
