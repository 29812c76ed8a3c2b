#include "chat/chat_template.h"

#include "chat/json_depth.h"

namespace clover::chat {

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
  // Copying and converting a value recurses once per level: refuse what would overflow the stack.
  for (const json* v : {&req.messages, &req.tools, &req.kwargs})
    if (json_depth(*v) > kMaxJsonDepth)
      throw jinja::TemplateError("the conversation nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", 0, 0);
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

RenderedPrompt ChatTemplate::apply(const ChatRequest& req) const {
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
