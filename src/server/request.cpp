#include "server/request.h"

#include <cmath>
#include <limits>
#include <random>
#include <string_view>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/json_limits.h"

namespace clover::server {

namespace {

DecodeMode parse_mode(const json& v, const std::string& field) {
  if (!v.is_string()) throw wrong_type(field, "a string", v);
  const auto s = v.get<std::string>();
  if (s == "ar") return DecodeMode::AR;
  if (s == "diffusion") return DecodeMode::Diffusion;
  if (s == "spec") return DecodeMode::Spec;
  throw bad_request("'" + field + "' must be one of ar, diffusion, spec (got \"" + s + "\")", field);
}

// OpenAI logit_bias: {"token id": bias}, bias in [-100, 100], at most kMaxLogitBias entries (OpenAI's
// limit; the body scanner's 256 keys per object, json_limits.h, come first).
constexpr size_t kMaxLogitBias = 300;
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& v, int n_vocab) {
  if (!v.is_object()) throw wrong_type("logit_bias", "an object mapping token ids to biases", v);
  if (v.size() > kMaxLogitBias)
    throw bad_request("'logit_bias' has " + std::to_string(v.size()) + " entries (at most " + std::to_string(kMaxLogitBias) + ")",
                      "logit_bias");
  std::vector<std::pair<int32_t, float>> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& key = it.key();
    const std::string field = "logit_bias." + key;
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || (n_vocab > 0 && id >= n_vocab) || id > std::numeric_limits<int32_t>::max())
      throw bad_request("'logit_bias' key \"" + key + "\" is not a token id in [0, " + std::to_string(n_vocab) + ")", field);
    const json& b = it.value();
    if (!b.is_number()) throw wrong_type(field, "a number", b);
    const double x = b.get<double>();
    if (!std::isfinite(x) || x < -100.0 || x > 100.0)
      throw bad_request("'" + field + "' must be between -100 and 100 (got " + b.dump() + ")", field);
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(x));
  }
  return out;
}

// Fields shared by both endpoints: sampling, limits, stop, stream, the decoding extension.
void parse_common(const json& body, const RequestDefaults& d, CompletionRequest& r) {
  if (present(body, "model")) {
    if (!body["model"].is_string()) throw wrong_type("model", "a string", body["model"]);
    r.model = body["model"].get<std::string>();
  }
  get_bool(body, "stream", r.stream);
  if (present(body, "stream_options")) {
    const json& so = body["stream_options"];
    if (!so.is_object()) throw wrong_type("stream_options", "an object", so);
    if (present(so, "include_usage") && !so["include_usage"].is_boolean())
      throw wrong_type("stream_options.include_usage", "a boolean", so["include_usage"]);
    r.include_usage = so.value("include_usage", false);
  }
  int64_t n = 1;
  if (get_int(body, "n", n, 1, std::numeric_limits<int64_t>::max()) && n != 1)
    throw bad_request("only n = 1 is supported", "n");

  GenerateOptions& g = r.gen;
  g.sampling = d.sampling;
  g.mode = d.mode;
  g.threshold = d.threshold;
  int64_t max_tokens = 0;
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  if (d.n_predict >= 0) {  // the server's -n, unless the request says otherwise
    r.max_tokens_given = true;
    g.max_tokens = d.n_predict;
  }
  if (get_int(body, "max_completion_tokens", max_tokens, -1, kMaxInt) || get_int(body, "max_tokens", max_tokens, -1, kMaxInt)) {
    r.max_tokens_given = max_tokens >= 0;  // -1: until the context is full (llama.cpp)
    g.max_tokens = static_cast<int>(std::max<int64_t>(max_tokens, 0));
  }
  SamplingOptions& s = g.sampling;
  get_number(body, "temperature", s.temperature, 0.0, 100.0);
  get_number(body, "top_p", s.top_p, 0.0, 1.0);
  get_number(body, "min_p", s.min_p, 0.0, 1.0);
  int64_t v = 0;
  if (get_int(body, "top_k", v, 0, kMaxInt)) s.top_k = static_cast<int>(v);
  get_number(body, "presence_penalty", s.presence_penalty, -2.0, 2.0);
  get_number(body, "frequency_penalty", s.frequency_penalty, -2.0, 2.0);
  // 1 is off; 0 would divide the logits by zero (a ratio, not a difference like the others).
  if (get_number(body, "repeat_penalty", s.repeat_penalty, 0.0, 10.0) && !(s.repeat_penalty > 0.0f))
    throw bad_request("'repeat_penalty' must be greater than 0 and at most 10 (1 is off; got 0)", "repeat_penalty");
  if (get_int(body, "repeat_last_n", v, -1, kMaxInt)) s.repeat_last_n = static_cast<int>(v);
  int64_t seed = d.seed;
  get_int(body, "seed", seed, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  s.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  get_bool(body, "ignore_eos", g.ignore_eos);
  get_bool(body, "return_tokens", r.return_tokens);
  if (present(body, "logit_bias")) s.logit_bias = parse_logit_bias(body["logit_bias"], d.n_vocab);

  if (present(body, "stop")) {
    const json& st = body["stop"];
    if (st.is_string()) {
      g.stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      for (const auto& x : st) {
        if (!x.is_string()) throw wrong_type("stop[]", "a string", x);
        g.stop.push_back(x.get<std::string>());
      }
    } else {
      throw wrong_type("stop", "a string or an array of strings", st);
    }
    std::erase(g.stop, std::string());
  }

  // Extension: {"clover": {"mode": "ar|diffusion|spec", "threshold": 0.9, "block_size": 32}}
  if (present(body, "clover")) {
    const json& c = body["clover"];
    if (!c.is_object()) throw wrong_type("clover", "an object", c);
    if (present(c, "mode")) g.mode = parse_mode(c["mode"], "clover.mode");
    if (present(c, "threshold")) {
      if (!c["threshold"].is_number()) throw wrong_type("clover.threshold", "a number", c["threshold"]);
      const double t = c["threshold"].get<double>();
      if (!(t > 0.0 && t <= 1.0)) throw bad_request("'clover.threshold' must be in (0, 1]", "clover.threshold");
      g.threshold = static_cast<float>(t);
    }
    if (present(c, "block_size")) {
      if (!c["block_size"].is_number_integer()) throw wrong_type("clover.block_size", "an integer", c["block_size"]);
      const int64_t b = c["block_size"].get<int64_t>();
      if (b < 1 || b > 4096) throw bad_request("'clover.block_size' must be between 1 and 4096", "clover.block_size");
      g.block_size = static_cast<int>(b);
    }
  }
}

// Deeply nested values would overflow the stack of the recursive code that walks them later
// (copies, the chat layer's normalisation, rendering), and big objects cost quadratic time to
// build: both are refused by a linear scan before any DOM is built (json_limits.h).
json parse_limited(std::string_view text, const std::string& field) {
  const JsonScan scan = field.empty() ? scan_json(text) : scan_json(text, field);
  if (!scan.error.empty()) throw bad_request(scan.error, field);
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace

json parse_body(const std::string& body) {
  json j = parse_limited(body, "");
  if (j.is_discarded()) throw bad_request("the request body is not valid JSON");
  if (!j.is_object()) throw bad_request(std::string("the request body must be a JSON object (got ") + j.type_name() + ")");
  return j;
}

CompletionRequest parse_chat_request(const json& body, const RequestDefaults& d) {
  CompletionRequest r;
  if (!body.contains("messages")) throw bad_request("'messages' is required", "messages");
  const json& msgs = body["messages"];
  if (!msgs.is_array()) throw wrong_type("messages", "an array", msgs);
  if (msgs.empty()) throw bad_request("'messages' must not be empty", "messages");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string f = "messages[" + std::to_string(i) + "]";
    if (!msgs[i].is_object()) throw wrong_type(f, "an object", msgs[i]);
    if (!msgs[i].contains("role") || !msgs[i]["role"].is_string()) throw bad_request(f + ".role must be a string", f + ".role");
    // OpenAI requires it: a tool result that names no call cannot be matched to one.
    if (msgs[i]["role"] == "tool" && !(present(msgs[i], "tool_call_id") && msgs[i]["tool_call_id"].is_string()))
      throw bad_request(f + ".tool_call_id must be a string (a tool message answers one tool call)", f + ".tool_call_id");
    if (msgs[i].contains("content")) {
      const json& c = msgs[i]["content"];
      if (!c.is_null() && !c.is_string() && !c.is_array()) throw wrong_type(f + ".content", "a string, an array or null", c);
    }
    if (present(msgs[i], "tool_calls")) {
      const json& calls = msgs[i]["tool_calls"];
      if (!calls.is_array()) throw wrong_type(f + ".tool_calls", "an array", calls);
      // String arguments are parsed into objects before rendering: bound their depth too.
      for (const auto& c : calls) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) continue;
        const json& a = c["function"].value("arguments", json());
        if (a.is_string()) parse_limited(a.get_ref<const std::string&>(), f + ".tool_calls[].function.arguments");
      }
    }
  }
  parse_common(body, d, r);
  r.chat.messages = msgs;

  if (present(body, "tools")) {
    const json& t = body["tools"];
    if (!t.is_array()) throw wrong_type("tools", "an array", t);
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string f = "tools[" + std::to_string(i) + "]";
      if (!t[i].is_object()) throw wrong_type(f, "an object", t[i]);
      if (!t[i].contains("function") || !t[i]["function"].is_object())
        throw bad_request(f + ".function must be an object", f + ".function");
      if (!t[i]["function"].contains("name") || !t[i]["function"]["name"].is_string())
        throw bad_request(f + ".function.name must be a string", f + ".function.name");
    }
    if (!t.empty()) r.chat.tools = t;
  }
  if (present(body, "tool_choice")) {
    const json& tc = body["tool_choice"];
    if (tc.is_string()) {
      const auto s = tc.get<std::string>();
      if (s != "none" && s != "auto" && s != "required")
        throw bad_request("'tool_choice' must be none, auto, required or an object (got \"" + s + "\")", "tool_choice");
      if (s == "none") r.parse_tools = false;
    } else if (!tc.is_object()) {
      throw wrong_type("tool_choice", "a string or an object", tc);
    } else {
      // {"type":"function","function":{"name":N}}: N must be one of the tools.
      const json* fn = tc.contains("function") && tc["function"].is_object() ? &tc["function"] : nullptr;
      if (!fn || !fn->contains("name") || !(*fn)["name"].is_string())
        throw bad_request("'tool_choice.function.name' must be a string", "tool_choice");
      const std::string& name = (*fn)["name"].get_ref<const std::string&>();
      bool found = false;
      if (r.chat.tools.is_array())
        for (const auto& t : r.chat.tools) found = found || t["function"]["name"] == name;
      if (!found) throw bad_request("'tool_choice' names the function '" + name + "', which is not among the tools", "tool_choice");
    }
  }
  if (!r.parse_tools) r.chat.tools = nullptr;  // "none": the model is not told about the tools
  get_bool(body, "parallel_tool_calls", r.parallel_tool_calls);

  // logprobs: true + top_logprobs 0..20 (the alternatives need logprobs: true, as OpenAI says).
  bool logprobs = false;
  get_bool(body, "logprobs", logprobs);
  int64_t top = 0;
  if (get_int(body, "top_logprobs", top, 0, 20) && top > 0 && !logprobs)
    throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  if (logprobs) r.gen.logprobs = static_cast<int>(top);

  // The thinking budget (llama-server's reasoning_budget; thinking_budget_tokens as Anthropic names it).
  r.reasoning_budget = d.reasoning_budget;
  int64_t v = 0;
  for (const char* f : {"reasoning_budget", "thinking_budget_tokens"})
    if (get_int(body, f, v, -1, std::numeric_limits<int>::max())) r.reasoning_budget = static_cast<int>(v);

  // Thinking: server default < top-level enable_thinking < chat_template_kwargs.
  r.chat.kwargs = d.chat_template_kwargs;
  bool thinking = true;
  if (get_bool(body, "enable_thinking", thinking)) r.chat.kwargs["enable_thinking"] = thinking;
  if (present(body, "chat_template_kwargs")) {
    const json& k = body["chat_template_kwargs"];
    if (!k.is_object()) throw wrong_type("chat_template_kwargs", "an object", k);
    if (k.contains("enable_thinking") && !k["enable_thinking"].is_boolean())
      throw wrong_type("chat_template_kwargs.enable_thinking", "a boolean", k["enable_thinking"]);
    for (auto it = k.begin(); it != k.end(); ++it) r.chat.kwargs[it.key()] = it.value();
  }
  return r;
}

std::vector<int32_t> parse_token_ids(const json& v, const char* field, int n_vocab) {
  if (!v.is_array()) throw wrong_type(field, "an array of token ids", v);
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const auto& x : v) {
    if (!x.is_number_integer()) throw wrong_type(std::string(field) + "[]", "an integer token id", x);
    const int64_t id = x.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(x.get<uint64_t>(), INT64_MAX))
                                              : x.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      throw bad_request(std::string(field) + ": token id " + x.dump() + " is out of range [0, " + std::to_string(n_vocab) + ")",
                        field);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

CompletionRequest parse_completion_request(const json& body, const RequestDefaults& d, int n_vocab) {
  CompletionRequest r;
  if (!body.contains("prompt")) throw bad_request("'prompt' is required", "prompt");
  const json& p = body["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    r.prompt_tokens = parse_token_ids(p, "prompt", n_vocab);
  } else {
    throw bad_request("'prompt' must be a string, an array with one string, or an array of token ids", "prompt");
  }
  if (r.prompt.empty() && r.prompt_tokens.empty()) throw bad_request("'prompt' must not be empty", "prompt");
  if (present(body, "echo") && body["echo"] == true) throw bad_request("'echo' is not supported", "echo");
  parse_common(body, d, r);
  // logprobs: N alternatives per token (0..5, OpenAI's legacy completions limit).
  int64_t logprobs = 0;
  if (get_int(body, "logprobs", logprobs, 0, 5)) r.gen.logprobs = static_cast<int>(logprobs);
  return r;
}

}  // namespace clover::server
