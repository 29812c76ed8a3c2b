#include "chat/chat_template.h"

#include <algorithm>
#include <unordered_map>

#include "chat/json_depth.h"

namespace clover::chat {

namespace {

// ---- keeping the request's control-token text apart from the template's ----
//
// Placeholders: the character U+F0000 + k stands for entry k of the guard's table; its UTF-8 form
// is F3 B0..BF 80..BF 80..BF. Every string and object key of the request is copied with each
// control-token text replaced by a placeholder, and so is each placeholder-range character already
// there (so a request cannot name a table entry itself). A control text could also be formed across
// two strings the template writes side by side ("<|im_" + "end|>", e.g. two content parts): a
// string that starts with the end of a control text or ends with its start has that fragment
// replaced too, and the caller tokenises each literal span on its own, so no control token can
// straddle one. (Not covered: a template that writes a control text's start, then a request
// string, then its end. None does.)
constexpr uint32_t kPlaceholderBase = 0xF0000;
constexpr size_t kMaxPlaceholders = 0xFFFE;  // U+F0000..U+FFFFD

// The placeholder-range character at s[i], as its offset from the base; -1 when none.
int placeholder_at(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return -1;
  const auto b = [&](size_t j) { return static_cast<uint8_t>(s[i + j]); };
  if (b(0) != 0xF3 || (b(1) & 0xF0) != 0xB0 || (b(2) & 0xC0) != 0x80 || (b(3) & 0xC0) != 0x80) return -1;
  const uint32_t cp = (uint32_t(b(0) & 0x07) << 18) | (uint32_t(b(1) & 0x3F) << 12) | (uint32_t(b(2) & 0x3F) << 6) |
                      uint32_t(b(3) & 0x3F);
  return static_cast<int>(cp - kPlaceholderBase);
}

void append_placeholder(std::string& out, size_t k) {
  const uint32_t cp = kPlaceholderBase + static_cast<uint32_t>(k);
  out += static_cast<char>(0xF0 | (cp >> 18));
  out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out += static_cast<char>(0x80 | (cp & 0x3F));
}

class LiteralGuard {
 public:
  explicit LiteralGuard(const std::vector<std::string>& texts) : texts_(texts) {
    for (const auto& t : texts_) {
      first_[static_cast<uint8_t>(t.front())] = true;
      last_[static_cast<uint8_t>(t.back())] = true;
      max_len_ = std::max(max_len_, t.size());
    }
    first_[0xF3] = true;
  }

  bool empty() const { return table_.empty(); }

  json value(const json& v) {
    if (v.is_string()) return json(text(v.get_ref<const std::string&>()));
    if (v.is_array()) {
      json out = json::array();
      for (const auto& e : v) out.push_back(value(e));
      return out;
    }
    if (v.is_object()) {
      json out = json::object();
      for (auto it = v.begin(); it != v.end(); ++it) out[text(it.key())] = value(it.value());
      return out;
    }
    return v;
  }

  // `rendered` with the placeholders put back; `spans` gets where each one's text landed.
  std::string restore(std::string_view rendered, std::vector<TextSpan>* spans) const {
    std::string out;
    out.reserve(rendered.size());
    for (size_t i = 0; i < rendered.size();) {
      const int k = placeholder_at(rendered, i);
      if (k < 0 || static_cast<size_t>(k) >= table_.size()) {
        out += rendered[i++];
        continue;
      }
      const size_t begin = out.size();
      out += table_[size_t(k)];
      if (spans) {
        if (!spans->empty() && spans->back().end == begin) spans->back().end = out.size();
        else spans->push_back({begin, out.size()});
      }
      i += 4;
    }
    return out;
  }

  const std::string& first_original() const { return table_.front(); }

 private:
  size_t entry(std::string_view original) {
    auto [it, added] = index_.try_emplace(std::string(original), table_.size());
    if (added) {
      if (table_.size() >= kMaxPlaceholders)
        throw jinja::TemplateError("the request holds too many distinct special-token texts", 0, 0, /*raised=*/true);
      table_.emplace_back(original);
    }
    return it->second;
  }

  // The full control text at s[i] (longest first); empty when none.
  std::string_view control_at(std::string_view s, size_t i) const {
    if (!first_[static_cast<uint8_t>(s[i])]) return {};
    std::string_view best;
    for (const auto& t : texts_)
      if (t.size() > best.size() && s.compare(i, t.size(), t) == 0) best = t;
    return best;
  }

  std::string text(const std::string& s) {
    if (s.empty()) return s;
    std::string_view sv = s;
    // The leading fragment: the longest proper end of a control text that s starts with.
    size_t lead = 0;
    if (control_at(sv, 0).empty()) {
      for (size_t q = std::min(sv.size(), max_len_ - 1); q > 0 && lead == 0; --q) {
        if (!last_[static_cast<uint8_t>(sv[q - 1])]) continue;
        for (const auto& t : texts_)
          if (q < t.size() && std::string_view(t).ends_with(sv.substr(0, q))) {
            lead = q;
            break;
          }
      }
    }
    // Full occurrences and placeholder-range characters after it.
    struct Hit {
      size_t pos, len;
    };
    std::vector<Hit> hits;
    size_t scanned_to = lead;
    for (size_t i = lead; i < sv.size();) {
      if (placeholder_at(sv, i) >= 0) {
        hits.push_back({i, 4});
        i += 4;
        scanned_to = i;
        continue;
      }
      const std::string_view t = control_at(sv, i);
      if (t.empty()) {
        ++i;
        continue;
      }
      hits.push_back({i, t.size()});
      i += t.size();
      scanned_to = i;
    }
    // The trailing fragment: the longest proper start of a control text that s ends with.
    size_t tail = sv.size();
    for (size_t p = std::max(scanned_to, sv.size() >= max_len_ ? sv.size() - max_len_ + 1 : size_t(0)); p < sv.size(); ++p) {
      if (!first_[static_cast<uint8_t>(sv[p])]) continue;
      const std::string_view rest = sv.substr(p);
      bool found = false;
      for (const auto& t : texts_)
        if (rest.size() < t.size() && std::string_view(t).starts_with(rest)) found = true;
      if (found) {
        tail = p;
        break;
      }
    }
    if (lead == 0 && hits.empty() && tail == sv.size()) return s;
    std::string out;
    out.reserve(s.size());
    if (lead > 0) append_placeholder(out, entry(sv.substr(0, lead)));
    size_t at = lead;
    for (const Hit& h : hits) {
      out.append(sv.substr(at, h.pos - at));
      append_placeholder(out, entry(sv.substr(h.pos, h.len)));
      at = h.pos + h.len;
    }
    out.append(sv.substr(at, tail - at));
    if (tail < sv.size()) append_placeholder(out, entry(sv.substr(tail)));
    return out;
  }

  const std::vector<std::string>& texts_;
  bool first_[256] = {}, last_[256] = {};
  size_t max_len_ = 1;
  std::vector<std::string> table_;
  std::unordered_map<std::string, size_t> index_;
};

void check_depth(const ChatRequest& req) {
  // Copying and converting a value recurses once per level: refuse what would overflow the stack.
  for (const json* v : {&req.messages, &req.tools, &req.kwargs})
    if (json_depth(*v) > kMaxJsonDepth)
      throw jinja::TemplateError("the conversation nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", 0, 0);
}

}  // namespace

std::vector<PromptPiece> prompt_pieces(std::string_view prompt, const std::vector<TextSpan>& literal, size_t from,
                                       size_t to) {
  to = std::min(to, prompt.size());
  std::vector<PromptPiece> out;
  size_t at = from;
  for (const TextSpan& s : literal) {
    const size_t b = std::max(s.begin, from), e = std::min(s.end, to);
    if (b >= e) continue;
    if (b > at) out.push_back({prompt.substr(at, b - at), true});
    out.push_back({prompt.substr(b, e - b), false});
    at = e;
  }
  if (at < to) out.push_back({prompt.substr(at, to - at), true});
  return out;
}

json normalize_messages(const json& messages, bool typed_content) {
  json out = json::array();
  if (!messages.is_array()) return out;
  for (json m : messages) {
    if (!m.is_object()) {
      out.push_back(std::move(m));
      continue;
    }
    if (m.contains("role") && m["role"] == "developer") m["role"] = "system";
    if (!m.contains("reasoning_content") && m.contains("reasoning") && m["reasoning"].is_string())
      m["reasoning_content"] = m["reasoning"];
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (auto& tc : m["tool_calls"]) {
        if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object()) continue;
        auto& f = tc["function"];
        if (!f.contains("arguments") || !f["arguments"].is_string()) continue;
        const std::string& text = f["arguments"].get_ref<const std::string&>();
        if (json_text_depth(text) > kMaxJsonDepth) continue;  // stays a string: too deep to walk
        json args = json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (args.is_object()) f["arguments"] = std::move(args);
      }
    }
    if (!typed_content) {
      const json* c = m.contains("content") ? &m["content"] : nullptr;
      if (!c || c->is_null()) {
        m["content"] = "";
      } else if (c->is_array()) {
        std::string text;
        bool first = true;
        for (const auto& p : *c) {
          if (!p.is_object() || !p.contains("text") || !p["text"].is_string()) continue;
          if (!first) text += "\n";
          first = false;
          text += p["text"].get<std::string>();
        }
        m["content"] = text;
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

bool thinking_open_in(std::string_view gen) {
  size_t open = gen.rfind("<think>");
  if (open == std::string_view::npos) return false;
  return gen.find("</think>", open) == std::string_view::npos;
}

ChatTemplate::ChatTemplate(std::string_view source, std::string bos, std::string eos)
    : tmpl_(source), bos_(std::move(bos)), eos_(std::move(eos)) {
  json probe = {{"messages", json::array({{{"role", "user"},
                                           {"content", json::array({{{"type", "text"}, {"text", "<<probe>>"}}})}}})},
                {"tools", nullptr},
                {"documents", nullptr},
                {"add_generation_prompt", false},
                {"bos_token", bos_},
                {"eos_token", eos_}};
  try {
    typed_content_ = tmpl_.render(probe).find("<<probe>>") != std::string::npos;
  } catch (const jinja::TemplateError&) {
    typed_content_ = false;
  }
}

json ChatTemplate::context(const ChatRequest& req) const {
  check_depth(req);
  json ctx = json::object();
  ctx["messages"] = normalize_messages(req.messages, typed_content_);
  ctx["tools"] = req.tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = req.add_generation_prompt;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  if (req.kwargs.is_object())
    for (auto it = req.kwargs.begin(); it != req.kwargs.end(); ++it) ctx[it.key()] = it.value();
  return ctx;
}

std::string ChatTemplate::render(const ChatRequest& req) const { return tmpl_.render(context(req)); }

void ChatTemplate::keep_as_text(std::vector<std::string> control_texts) {
  std::erase_if(control_texts, [](const std::string& t) { return t.empty(); });
  std::stable_sort(control_texts.begin(), control_texts.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  control_texts_ = std::move(control_texts);
}

RenderedPrompt ChatTemplate::apply(const ChatRequest& req) const {
  if (control_texts_.empty()) return apply_plain(req);
  check_depth(req);
  LiteralGuard guard(control_texts_);
  ChatRequest guarded;
  guarded.messages = guard.value(req.messages);
  guarded.tools = guard.value(req.tools);
  guarded.kwargs = guard.value(req.kwargs);
  guarded.add_generation_prompt = req.add_generation_prompt;
  if (guard.empty()) return apply_plain(req);
  const RenderedPrompt g = apply_plain(guarded);
  RenderedPrompt r;
  r.prompt = guard.restore(g.prompt, &r.literal);
  r.generation_prompt = guard.restore(g.generation_prompt, nullptr);
  r.thinking_open = thinking_open_in(r.generation_prompt);
  // The placeholders must have changed nothing but where the text came from.
  if (r.prompt != render(req))
    throw jinja::TemplateError("the request holds the special-token text '" + guard.first_original() +
                                   "', and the chat template transforms it in a way that cannot keep it apart from the "
                                   "template's own special tokens; remove it from the request",
                               0, 0, /*raised=*/true);
  return r;
}

RenderedPrompt ChatTemplate::apply_plain(const ChatRequest& req) const {
  RenderedPrompt r;
  r.prompt = render(req);
  if (!req.add_generation_prompt) return r;
  // The generation prompt is what add_generation_prompt adds: diff against a render without it.
  ChatRequest without = req;
  without.add_generation_prompt = false;
  std::string base;
  try {
    base = render(without);
  } catch (const jinja::TemplateError&) {
    base.clear();
  }
  if (r.prompt.size() >= base.size() && r.prompt.compare(0, base.size(), base) == 0)
    r.generation_prompt = r.prompt.substr(base.size());
  r.thinking_open = thinking_open_in(r.generation_prompt);
  return r;
}

}  // namespace clover::chat
