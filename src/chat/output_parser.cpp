#include "chat/output_parser.h"

#include <random>

#include "chat/json_depth.h"
#include "chat/tool_values.h"

namespace clover::chat {

using json = nlohmann::ordered_json;

json ParsedMessage::to_openai() const {
  json m = json::object();
  m["role"] = "assistant";
  if (content.empty() && !tool_calls.empty()) m["content"] = nullptr;
  else m["content"] = content;
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : tool_calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";
constexpr size_t kMaxNameLength = 256;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

enum class Match { No, Partial, Full };

// Does `m` start at s[i]? Partial: the text ends inside a prefix of `m`.
Match match_at(std::string_view s, size_t i, std::string_view m) {
  size_t n = std::min(m.size(), s.size() - i);
  if (s.compare(i, n, m.substr(0, n)) != 0) return Match::No;
  return n == m.size() ? Match::Full : Match::Partial;
}

// End of the longest prefix of `s` that does not cut a UTF-8 character.
size_t utf8_complete(std::string_view s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = s[n - back];
    if ((c & 0xc0) == 0x80) continue;  // continuation byte
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    return back < len ? n - back : n;
  }
  return n;
}

}  // namespace

struct StreamParser::Impl {
  enum class State {
    ReasoningStart,  // skip whitespace and a redundant <think>
    ContentStart,    // skip whitespace; a leading <think> opens reasoning
    Reasoning,
    Content,
    CallOpen,        // after <tool_call>: <function=...> (XML) or {...} (JSON)
    CallName,        // after <function=
    CallBody,        // parameters, </function>, </tool_call>
    ParamName,       // after <parameter=
    ValueStart,      // skip one newline
    Value,
    AfterFunction,   // after </function>
    CallJson,        // JSON object up to </tool_call>
  };
  enum class Step { Progress, NeedMore };

  ParserOptions opt;
  ToolSchemas schemas;
  std::mt19937_64 rng;
  std::string buf;
  size_t pos = 0;
  size_t avail = 0;  // bytes of buf the machine may look at
  bool final = false;
  State state;
  ParsedMessage msg;
  std::vector<StreamEvent> events;

  std::string pending_ws;          // trailing whitespace of reasoning/content, held back
  bool reasoning_closed_implicitly = false;  // <tool_call> ended reasoning; drop a later </think>
  size_t call_start = 0;           // offset of the current <tool_call> (for the content fallback)
  bool call_from_reasoning = false;  // that <tool_call> interrupted reasoning
  bool in_call = false;            // a call header was emitted and the call is not closed yet
  size_t n_params = 0;
  std::string param_name;
  bool value_is_string = false;
  bool pending_nl = false;         // a newline in a value that may be the one before </parameter>
  std::string value_buf;           // raw value of a non-string parameter
  size_t json_scanned = 0;         // CallJson: text up to here holds no </tool_call>

  explicit Impl(ParserOptions o) : opt(std::move(o)), schemas(opt.tools) {
    uint64_t seed = opt.id_seed;
    if (seed == 0) seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    rng.seed(seed);
    state = opt.thinking_open ? State::ReasoningStart : State::ContentStart;
  }

  // ---- emission ----

  void emit(StreamEvent::Kind kind, std::string_view text, size_t index = 0) {
    if (text.empty()) return;
    if (!events.empty() && events.back().kind == kind && kind != StreamEvent::Kind::ToolCallBegin &&
        events.back().index == index) {
      events.back().text.append(text);
    } else {
      StreamEvent e{kind, std::string(text), index, {}, {}};
      events.push_back(std::move(e));
    }
    switch (kind) {
      case StreamEvent::Kind::Reasoning: msg.reasoning.append(text); break;
      case StreamEvent::Kind::Content: msg.content.append(text); break;
      case StreamEvent::Kind::ToolCallArguments: msg.tool_calls[index].arguments.append(text); break;
      default: break;
    }
  }

  // Reasoning or content text: surrounding whitespace is trimmed, so trailing whitespace waits
  // until more text follows.
  void add_text(bool reasoning, std::string_view s) {
    auto kind = reasoning ? StreamEvent::Kind::Reasoning : StreamEvent::Kind::Content;
    const std::string& so_far = reasoning ? msg.reasoning : msg.content;
    size_t k = s.size();
    while (k > 0 && is_ws(s[k - 1])) --k;
    if (k == 0) {
      pending_ws.append(s);
      return;
    }
    std::string_view head = s.substr(0, k);
    if (so_far.empty()) {
      size_t b = 0;
      while (b < head.size() && is_ws(head[b])) ++b;
      emit(kind, head.substr(b));
    } else {
      emit(kind, pending_ws);
      emit(kind, head);
    }
    pending_ws.assign(s.substr(k));
  }

  std::string make_id() {
    static const char* digits = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string id = opt.id_prefix;
    for (int i = 0; i < 24; ++i) id += digits[rng() % 62];
    return id;
  }

  void begin_call(std::string name) {
    pending_ws.clear();
    call_from_reasoning = false;
    ToolCall c;
    c.id = make_id();
    c.name = std::move(name);
    msg.tool_calls.push_back(c);
    StreamEvent e{StreamEvent::Kind::ToolCallBegin, {}, msg.tool_calls.size() - 1, c.id, c.name};
    events.push_back(std::move(e));
    in_call = true;
    n_params = 0;
  }

  void args(std::string_view fragment) { emit(StreamEvent::Kind::ToolCallArguments, fragment, msg.tool_calls.size() - 1); }

  void end_call() {
    if (!in_call) return;
    args(n_params == 0 ? "{}" : "}");
    in_call = false;
  }

  // Gives up on a <tool_call> that turned out not to be one: its text stays reasoning or content,
  // whichever it interrupted.
  void fallback_to_content(size_t upto) {
    add_text(call_from_reasoning, std::string_view(buf).substr(call_start, upto - call_start));
    pos = upto;
    state = call_from_reasoning ? State::Reasoning : State::Content;
    if (call_from_reasoning) reasoning_closed_implicitly = false;
    call_from_reasoning = false;
  }

  // ---- parameters ----

  void begin_value(std::string name) {
    param_name = std::move(name);
    const std::string& fn = msg.tool_calls.back().name;
    value_is_string = schemas.is_string(fn, param_name);
    std::string frag = n_params == 0 ? "{\"" : ",\"";
    json_escape_append(frag, param_name);
    frag += "\":";
    if (value_is_string) frag += "\"";
    args(frag);
    ++n_params;
    pending_nl = false;
    value_buf.clear();
  }

  void value_append(std::string_view s) {
    if (s.empty()) return;
    if (value_is_string) {
      std::string esc;
      json_escape_append(esc, s);
      args(esc);
    } else {
      value_buf.append(s);
    }
  }

  void end_value() {
    if (value_is_string) args("\"");
    else args(typed_value_json(value_buf, schemas.types(msg.tool_calls.back().name, param_name)));
    pending_nl = false;
  }

  // ---- the machine ----

  std::string_view view() const { return std::string_view(buf).substr(0, avail); }

  // Skips whitespace from `i` without consuming; returns the first non-space offset.
  size_t skip_ws(size_t i) const {
    std::string_view s = view();
    while (i < s.size() && is_ws(s[i])) ++i;
    return i;
  }

  void run() {
    while (step() == Step::Progress) {
    }
  }

  Step step() {
    switch (state) {
      case State::ReasoningStart: return step_start(true);
      case State::ContentStart: return step_start(false);
      case State::Reasoning: return step_text(true);
      case State::Content: return step_text(false);
      case State::CallOpen: return step_call_open();
      case State::CallName: return step_call_name();
      case State::CallBody: return step_call_body();
      case State::ParamName: return step_param_name();
      case State::ValueStart: return step_value_start();
      case State::Value: return step_value();
      case State::AfterFunction: return step_after_function();
      case State::CallJson: return step_call_json();
    }
    return Step::NeedMore;
  }

  Step step_start(bool reasoning) {
    std::string_view s = view();
    size_t i = skip_ws(pos);
    if (i == s.size() && !final) return Step::NeedMore;
    Match m = i < s.size() ? match_at(s, i, kThinkOpen) : Match::No;
    if (m == Match::Partial && !final) return Step::NeedMore;
    if (m == Match::Full) {
      pos = i + kThinkOpen.size();
      state = State::Reasoning;
      return Step::Progress;
    }
    state = reasoning ? State::Reasoning : State::Content;
    return Step::Progress;
  }

  Step step_text(bool reasoning) {
    std::string_view s = view();
    if (pos >= s.size()) return Step::NeedMore;
    size_t lt = s.find('<', pos);
    if (lt == std::string_view::npos) lt = s.size();
    if (lt > pos) {
      add_text(reasoning, s.substr(pos, lt - pos));
      pos = lt;
      return Step::Progress;
    }
    // At '<': a marker?
    Match call = match_at(s, pos, kCallOpen);
    Match think = (reasoning || reasoning_closed_implicitly) ? match_at(s, pos, kThinkClose) : Match::No;
    if (call == Match::Full) {  // held whitespace is dropped by begin_call(), kept by a fallback
      if (reasoning) reasoning_closed_implicitly = true;
      call_from_reasoning = reasoning;
      call_start = pos;
      pos += kCallOpen.size();
      state = State::CallOpen;
      return Step::Progress;
    }
    if (think == Match::Full) {
      pos += kThinkClose.size();
      if (reasoning) {
        pending_ws.clear();
        state = State::ContentStart;
      }
      reasoning_closed_implicitly = false;
      return Step::Progress;
    }
    if ((call == Match::Partial || think == Match::Partial) && !final) return Step::NeedMore;
    add_text(reasoning, "<");
    ++pos;
    return Step::Progress;
  }

  Step step_call_open() {
    std::string_view s = view();
    size_t i = skip_ws(pos);
    if (i == s.size()) {
      if (!final) return Step::NeedMore;
      fallback_to_content(i);
      return Step::Progress;
    }
    if (s[i] == '{') {
      pos = i;
      state = State::CallJson;
      return Step::Progress;
    }
    Match m = match_at(s, i, kFunctionOpen);
    if (m == Match::Partial && !final) return Step::NeedMore;
    if (m == Match::Full) {
      pos = i + kFunctionOpen.size();
      state = State::CallName;
      return Step::Progress;
    }
    fallback_to_content(i);
    return Step::Progress;
  }

  // NAME> for <function=NAME> and <parameter=NAME>: the offset of '>' or npos (wait), or the
  // size of the text when the name is invalid (newline or too long).
  size_t find_name_end(size_t from, bool& invalid) const {
    std::string_view s = view();
    invalid = false;
    for (size_t i = from; i < s.size(); ++i) {
      if (s[i] == '>') return i;
      if (s[i] == '\n' || s[i] == '<' || i - from > kMaxNameLength) { invalid = true; return i; }
    }
    return std::string_view::npos;
  }

  static std::string trimmed(std::string_view s) {
    size_t b = 0, e = s.size();
    while (b < e && is_ws(s[b])) ++b;
    while (e > b && is_ws(s[e - 1])) --e;
    return std::string(s.substr(b, e - b));
  }

  Step step_call_name() {
    std::string_view s = view();
    bool invalid;
    size_t gt = find_name_end(pos, invalid);
    if (gt == std::string_view::npos) {
      if (!final) return Step::NeedMore;
      std::string name = trimmed(s.substr(pos));
      if (name.empty()) {
        fallback_to_content(s.size());
      } else {
        begin_call(name);
        pos = s.size();
        state = State::CallBody;
      }
      return Step::Progress;
    }
    std::string name = trimmed(s.substr(pos, gt - pos));
    if (invalid || name.empty()) {
      fallback_to_content(invalid ? gt : gt + 1);
      return Step::Progress;
    }
    begin_call(name);
    pos = gt + 1;
    state = State::CallBody;
    return Step::Progress;
  }

  Step step_call_body() {
    std::string_view s = view();
    pos = skip_ws(pos);
    if (pos >= s.size()) {
      if (!final) return Step::NeedMore;
      end_call();
      state = State::Content;
      return Step::Progress;
    }
    Match param = match_at(s, pos, kParamOpen), fclose = match_at(s, pos, kFunctionClose),
          cclose = match_at(s, pos, kCallClose), fopen = match_at(s, pos, kFunctionOpen);
    if (param == Match::Full) {
      pos += kParamOpen.size();
      state = State::ParamName;
    } else if (fclose == Match::Full) {
      pos += kFunctionClose.size();
      state = State::AfterFunction;
    } else if (cclose == Match::Full) {
      pos += kCallClose.size();
      end_call();
      state = State::Content;
    } else if (fopen == Match::Full) {  // a second function without closing the first
      end_call();
      call_start = pos;
      pos += kFunctionOpen.size();
      state = State::CallName;
    } else if ((param == Match::Partial || fclose == Match::Partial || cclose == Match::Partial ||
                fopen == Match::Partial) && !final) {
      return Step::NeedMore;
    } else {
      // Stray text inside a function body: skip it.
      size_t next = s.find('<', pos + 1);
      pos = next == std::string_view::npos ? s.size() : next;
    }
    return Step::Progress;
  }

  Step step_param_name() {
    std::string_view s = view();
    bool invalid;
    size_t gt = find_name_end(pos, invalid);
    if (gt == std::string_view::npos) {
      if (!final) return Step::NeedMore;
      pos = s.size();
      state = State::CallBody;
      return Step::Progress;
    }
    if (invalid) {  // not a parameter tag after all: skip it
      pos = gt;
      state = State::CallBody;
      return Step::Progress;
    }
    begin_value(trimmed(s.substr(pos, gt - pos)));
    pos = gt + 1;
    state = State::ValueStart;
    return Step::Progress;
  }

  Step step_value_start() {
    std::string_view s = view();
    if (pos >= s.size()) {
      if (!final) return Step::NeedMore;
      end_value();
      state = State::CallBody;
      return Step::Progress;
    }
    if (s[pos] == '\n') ++pos;
    state = State::Value;
    return Step::Progress;
  }

  // "</parameter>" at i ends the value when what follows it is the next tag or the end.
  Match value_terminator(size_t i) const {
    std::string_view s = view();
    Match close = match_at(s, i, kParamClose);
    if (close != Match::Full) return close == Match::Partial && !final ? Match::Partial : Match::No;
    size_t j = skip_ws(i + kParamClose.size());
    if (j >= s.size()) return final ? Match::Full : Match::Partial;
    bool partial = false;
    for (auto m : {kParamOpen, kFunctionClose, kCallClose}) {
      Match r = match_at(s, j, m);
      if (r == Match::Full) return Match::Full;
      partial = partial || r == Match::Partial;
    }
    return partial && !final ? Match::Partial : Match::No;
  }

  void flush_nl() {
    if (pending_nl) value_append("\n");
    pending_nl = false;
  }

  Step step_value() {
    std::string_view s = view();
    if (pos >= s.size()) {
      if (!final) return Step::NeedMore;
      end_value();  // truncated: the held newline is dropped like the one before </parameter>
      state = State::CallBody;
      return Step::Progress;
    }
    size_t stop = s.find_first_of("<\n", pos);
    if (stop == std::string_view::npos) stop = s.size();
    if (stop > pos) {
      flush_nl();
      value_append(s.substr(pos, stop - pos));
      pos = stop;
      return Step::Progress;
    }
    if (s[pos] == '\n') {
      flush_nl();
      pending_nl = true;
      ++pos;
      return Step::Progress;
    }
    Match t = value_terminator(pos);
    if (t == Match::Partial) return Step::NeedMore;
    if (t == Match::Full) {
      end_value();
      pos += kParamClose.size();
      state = State::CallBody;
      return Step::Progress;
    }
    flush_nl();
    value_append("<");
    ++pos;
    return Step::Progress;
  }

  Step step_after_function() {
    std::string_view s = view();
    size_t i = skip_ws(pos);
    if (i >= s.size() && !final) return Step::NeedMore;
    Match cclose = i < s.size() ? match_at(s, i, kCallClose) : Match::No;
    Match fopen = i < s.size() ? match_at(s, i, kFunctionOpen) : Match::No;
    if ((cclose == Match::Partial || fopen == Match::Partial) && !final) return Step::NeedMore;
    end_call();
    if (cclose == Match::Full) {
      pos = i + kCallClose.size();
      state = State::Content;
    } else if (fopen == Match::Full) {
      call_start = i;
      pos = i + kFunctionOpen.size();
      state = State::CallName;
    } else {
      state = State::Content;  // missing </tool_call>: what follows is content
    }
    return Step::Progress;
  }

  Step step_call_json() {
    std::string_view s = view();
    // Resume the search where the last one stopped (a long JSON call streamed in small pieces).
    size_t from = std::max(pos, json_scanned > kCallClose.size() ? json_scanned - kCallClose.size() : 0);
    size_t close = s.find(kCallClose, from);
    json_scanned = s.size();
    if (close == std::string_view::npos && !final) return Step::NeedMore;
    json_scanned = 0;
    size_t end = close == std::string_view::npos ? s.size() : close;
    // Deeper JSON would overflow the stack of dump() below: such a call stays text.
    const std::string_view body = s.substr(pos, end - pos);
    json j = json_text_depth(body) <= kMaxJsonDepth ? json::parse(body, nullptr, false) : json(json::value_t::discarded);
    const json* a = nullptr;
    if (j.is_object()) {
      if (j.contains("arguments")) a = &j["arguments"];
      else if (j.contains("parameters")) a = &j["parameters"];
    }
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) {
      fallback_to_content(close == std::string_view::npos ? end : end + kCallClose.size());
      return Step::Progress;
    }
    begin_call(j["name"].get<std::string>());
    std::string arguments = "{}";
    if (a && a->is_object()) {
      arguments = a->dump(-1, ' ', false, json::error_handler_t::replace);
    } else if (a && a->is_string() && json_text_depth(a->get_ref<const std::string&>()) <= kMaxJsonDepth) {
      json inner = json::parse(a->get<std::string>(), nullptr, false);
      if (inner.is_object()) arguments = inner.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    args(arguments);
    n_params = 1;  // the object is complete: end_call() must not add "{}"
    in_call = false;
    pos = close == std::string_view::npos ? end : end + kCallClose.size();
    state = State::Content;
    return Step::Progress;
  }

  std::vector<StreamEvent> take_events() {
    std::vector<StreamEvent> out;
    out.swap(events);
    return out;
  }
};

StreamParser::StreamParser(ParserOptions opt) : impl_(std::make_unique<Impl>(std::move(opt))) {}
StreamParser::~StreamParser() = default;
StreamParser::StreamParser(StreamParser&&) noexcept = default;

std::vector<StreamEvent> StreamParser::push(std::string_view text) {
  if (impl_->final) return {};
  impl_->buf.append(text);
  impl_->avail = utf8_complete(impl_->buf);
  impl_->run();
  return impl_->take_events();
}

std::vector<StreamEvent> StreamParser::finish() {
  if (impl_->final) return {};
  impl_->final = true;
  impl_->avail = impl_->buf.size();
  impl_->run();
  impl_->end_call();
  impl_->pending_ws.clear();
  return impl_->take_events();
}

const ParsedMessage& StreamParser::message() const { return impl_->msg; }

ParsedMessage parse_output(std::string_view text, const ParserOptions& opt) {
  StreamParser p(opt);
  p.push(text);
  p.finish();
  return p.message();
}

}  // namespace clover::chat
