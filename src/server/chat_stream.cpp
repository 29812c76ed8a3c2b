#include "server/chat_stream.h"

namespace clover::server {

ChatOutput::ChatOutput(ChatOutputOptions opt) : opt_(std::move(opt)), parser_(opt_.parser) {}

std::vector<json> ChatOutput::deltas(const std::vector<chat::StreamEvent>& evs) const {
  using K = chat::StreamEvent::Kind;
  std::vector<json> out;
  for (const auto& e : evs) {
    switch (e.kind) {
      case K::Reasoning:
        if (!e.text.empty()) out.push_back({{"reasoning_content", e.text}, {"reasoning", e.text}});
        break;
      case K::Content:
        if (!e.text.empty()) out.push_back({{"content", e.text}});
        break;
      case K::ToolCallBegin:
        out.push_back({{"tool_calls", json::array({{{"index", e.index},
                                                    {"id", e.id},
                                                    {"type", "function"},
                                                    {"function", {{"name", e.name}, {"arguments", ""}}}}})}});
        break;
      case K::ToolCallArguments:
        if (!e.text.empty())
          out.push_back({{"tool_calls", json::array({{{"index", e.index}, {"function", {{"arguments", e.text}}}}})}});
        break;
    }
  }
  return out;
}

std::vector<chat::StreamEvent> ChatOutput::options_applied(std::vector<chat::StreamEvent> evs) const {
  using K = chat::StreamEvent::Kind;
  if (!opt_.parallel_tool_calls)
    std::erase_if(evs, [](const chat::StreamEvent& e) {
      return (e.kind == K::ToolCallBegin || e.kind == K::ToolCallArguments) && e.index > 0;
    });
  return evs;
}

std::vector<chat::StreamEvent> ChatOutput::push_events(std::string_view text) {
  raw_ += text;
  if (!opt_.parse) {
    if (text.empty()) return {};
    chat::StreamEvent e{};
    e.kind = chat::StreamEvent::Kind::Content;
    e.text = text;
    return {std::move(e)};
  }
  return options_applied(parser_.push(text));
}

std::vector<chat::StreamEvent> ChatOutput::finish_events() {
  if (!opt_.parse) return {};
  return options_applied(parser_.finish());
}

std::vector<json> ChatOutput::push(std::string_view text) { return deltas(push_events(text)); }

std::vector<json> ChatOutput::finish() { return deltas(finish_events()); }

bool ChatOutput::has_tool_calls() const { return opt_.parse && !parser_.message().tool_calls.empty(); }

json ChatOutput::message() const {
  json m = {{"role", "assistant"}};
  if (!opt_.parse) {
    m["content"] = raw_;
    return m;
  }
  const chat::ParsedMessage& p = parser_.message();
  const bool calls = !p.tool_calls.empty();
  m["content"] = p.content.empty() && calls ? json(nullptr) : json(p.content);
  if (!p.reasoning.empty()) {
    m["reasoning_content"] = p.reasoning;
    m["reasoning"] = p.reasoning;
  }
  if (calls) {
    json tc = json::array();
    for (size_t i = 0; i < p.tool_calls.size(); ++i) {
      if (i > 0 && !opt_.parallel_tool_calls) break;
      const auto& c = p.tool_calls[i];
      tc.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    m["tool_calls"] = std::move(tc);
  }
  return m;
}

}  // namespace clover::server
