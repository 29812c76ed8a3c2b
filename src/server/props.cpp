#include "server/props.h"

#include "server/generation.h"
#include "server/handlers.h"
#include "server/response.h"

namespace clover::server {

namespace {

const char* mode_name(DecodeMode m) { return m == DecodeMode::Diffusion ? "diffusion" : m == DecodeMode::Spec ? "spec" : "ar"; }

// llama-server's generation parameters (the ones this server has), plus the decoding extension.
json params_json(const ServerState& st, const GenerateOptions& g, int n_predict, int64_t seed, int reasoning_budget) {
  const SamplingOptions& s = g.sampling;
  return {{"n_predict", n_predict},
          {"max_tokens", n_predict},
          {"seed", seed},
          {"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"repeat_penalty", s.repeat_penalty},
          {"repeat_last_n", s.repeat_last_n},
          {"ignore_eos", g.ignore_eos},
          {"stop", g.stop},
          {"reasoning_format", st.opt.parse_reasoning ? "deepseek" : "none"},
          {"reasoning_budget", reasoning_budget},
          {"chat_template_kwargs", st.defaults.chat_template_kwargs},
          {"clover", {{"mode", mode_name(g.mode)}, {"threshold", g.threshold}, {"block_size", g.block_size}}}};
}

json default_params(const ServerState& st) {
  GenerateOptions g;
  g.sampling = st.defaults.sampling;
  g.mode = st.defaults.mode;
  g.threshold = st.defaults.threshold;
  g.block_size = 0;
  return params_json(st, g, st.defaults.n_predict, st.defaults.seed, st.defaults.reasoning_budget);
}

}  // namespace

void handle_props(ServerState& st, const httplib::Request&, httplib::Response& res) {
  const json props = {
      {"default_generation_settings", {{"params", default_params(st)}, {"n_ctx", st.scheduler->n_ctx()}}},
      {"total_slots", st.scheduler->n_slots()},
      {"model_alias", st.model_name},
      {"model_path", st.opt.model_path},
      {"modalities", {{"vision", false}, {"audio", false}}},
      {"endpoint_slots", st.opt.slots},
      {"endpoint_props", true},
      {"endpoint_metrics", st.opt.metrics},
      {"webui", st.opt.webui},
      {"chat_template", st.chat_template_source},
      {"build_info", "clover-0.1.0"},
      {"is_sleeping", false}};
  res.set_content(dump(props), "application/json");
}

void handle_slots(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  if (!st.opt.slots)
    throw ApiError(501, "not_supported_error", "This server does not support slots endpoint. Start it with `--slots`");
  const auto states = st.scheduler->slot_states();
  const bool fail_on_no_slot = req.has_param("fail_on_no_slot") && req.get_param_value("fail_on_no_slot") != "0" &&
                               req.get_param_value("fail_on_no_slot") != "false";
  bool any_idle = false;
  json out = json::array();
  for (const auto& s : states) {
    const Job* job = s.job.get();
    any_idle = any_idle || !job;
    json slot = {{"id", s.id},
                 {"id_task", job ? job->id : -1},
                 {"n_ctx", st.scheduler->n_ctx()},
                 {"speculative", job ? job->input.options.mode == DecodeMode::Spec : st.defaults.mode == DecodeMode::Spec},
                 {"is_processing", job != nullptr}};
    if (job) {
      const GenerateOptions& g = job->input.options;
      const int n_predict = job->input.max_tokens_given ? g.max_tokens : -1;
      const int decoded = job->n_decoded.load();
      slot["params"] = params_json(st, g, n_predict, static_cast<int64_t>(g.sampling.seed), job->input.reasoning_budget);
      slot["next_token"] = {{"has_next_token", true},
                            {"n_remain", n_predict < 0 ? -1 : std::max(0, n_predict - decoded)},
                            {"n_decoded", decoded},
                            {"stopping_word", ""}};
      slot["n_prompt_tokens"] = job->prompt_tokens();
    } else {
      slot["params"] = default_params(st);
      slot["next_token"] = {{"has_next_token", false}, {"n_remain", -1}, {"n_decoded", 0}, {"stopping_word", ""}};
      slot["n_cached_tokens"] = s.cached_tokens;
    }
    out.push_back(std::move(slot));
  }
  if (fail_on_no_slot && !any_idle) throw unavailable("no slot available");
  res.set_content(dump(out), "application/json");
}

void handle_apply_template(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const CompletionRequest r = parse_chat_request(body, st.defaults);
  res.set_content(dump({{"prompt", render_chat(st, r.chat).prompt}}), "application/json");
}

void register_cors(httplib::Server& http) {
  http.Options(R"(.*)", [](const httplib::Request& req, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    // A wildcard does not cover Authorization (Fetch standard): name what the browser asked for.
    const std::string asked = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers", asked.empty() ? "*" : asked);
    res.set_header("Access-Control-Max-Age", "86400");
  });
  http.set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!req.has_header("Origin")) return;
    res.set_header("Access-Control-Allow-Origin", req.get_header_value("Origin"));
    res.set_header("Access-Control-Allow-Credentials", "true");
    res.set_header("Vary", "Origin");
  });
}

}  // namespace clover::server
