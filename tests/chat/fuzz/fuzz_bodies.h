// The bodies of the chat-layer fuzz targets, shared by the libFuzzer entry points (fuzz_*.cpp,
// built with -DCLOVER_FUZZ=ON and clang) and by test_chat_fuzz_regressions, which replays every
// input kept under tests/chat/fuzz/regressions/ in the normal test run.
//
// Each body must not crash, hang or leak on any input; the parser body also checks its invariants
// (streaming == one-shot under several splits, arguments are valid JSON) and aborts if broken.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "chat/jinja/template.h"
#include "chat/output_parser.h"

namespace clover::chat::fuzz {

inline void check(bool ok) {
  if (!ok) std::abort();
}

// A template source, rendered with a small chat-like context.
inline int jinja_one(const uint8_t* data, size_t size) {
  std::string_view src(reinterpret_cast<const char*>(data), size);
  static const json ctx = json::parse(R"j({
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi <b>"},
                 {"role": "assistant", "content": null, "reasoning_content": "r",
                  "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [true, null, 2.5]}}}]},
                 {"role": "tool", "content": [{"type": "text", "text": "x"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "", "eos_token": "<|im_end|>", "n": 3, "s": "héllo"})j");
  jinja::TemplateOptions opt;
  opt.limits.max_steps = 20000;
  opt.limits.max_output_bytes = 1 << 20;
  opt.limits.max_call_depth = 16;
  opt.now = [] { return int64_t{1700000000}; };
  try {
    jinja::Template t(src, opt);
    t.render(ctx);
  } catch (const jinja::TemplateError&) {
  }
  return 0;
}

// Model output: byte 0 picks the options, the rest is the text. Checks streaming == one-shot.
inline int parser_one(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const json tools = json::parse(R"j([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
      "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
      "o": {"type": "object"}, "a": {"type": "array"}, "u": {"type": ["integer", "null"]}}}}}])j");
  ParserOptions opt;
  opt.thinking_open = data[0] & 1;
  opt.format = (data[0] & 2) ? ToolCallFormat::Qwen3Json : ToolCallFormat::Qwen35Xml;
  opt.tools = tools;
  opt.id_seed = 1;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  ParsedMessage one = parse_output(text, opt);
  for (const auto& c : one.tool_calls) {
    json j = json::parse(c.arguments, nullptr, false);
    check(j.is_object() || !c.arguments.empty());
  }
  (void)one.to_openai().dump(-1, ' ', false, json::error_handler_t::replace);
  // Splits: every byte, and a pseudo-random split derived from the first byte.
  for (int mode = 0; mode < 2; ++mode) {
    StreamParser p(opt);
    uint32_t state = data[0] * 2654435761u + 1;
    size_t i = 0;
    while (i < text.size()) {
      size_t n = 1;
      if (mode == 1) {
        state = state * 1103515245u + 12345u;
        n = 1 + (state >> 16) % 7;
      }
      n = std::min(n, text.size() - i);
      p.push(text.substr(i, n));
      i += n;
    }
    p.finish();
    check(p.message() == one);
  }
  return 0;
}

// A JSON request (messages, tools, kwargs) rendered through the Qwen3.5 template.
inline int render_one(const uint8_t* data, size_t size) {
  static const ChatTemplate* tmpl = [] {
    const char* env = std::getenv("CLOVER_FUZZ_TEMPLATE");
    std::string path = env ? env : std::string(CLOVER_CHAT_TEST_DIR) + "/templates/Qwen3.5.jinja";
    std::string src;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) src.append(buf, n);
      std::fclose(f);
    }
    if (src.empty()) std::abort();  // the template is part of the fuzz setup
    return new ChatTemplate(src, "", "<|im_end|>");
  }();
  json req = json::parse(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size, nullptr, false);
  if (req.is_discarded()) return 0;
  ChatRequest r;
  if (req.is_object()) {
    if (req.contains("messages")) r.messages = req["messages"];
    if (req.contains("tools")) r.tools = req["tools"];
    if (req.contains("kwargs") && req["kwargs"].is_object()) r.kwargs = req["kwargs"];
  } else {
    r.messages = req;
  }
  try {
    RenderedPrompt p = tmpl->apply(r);
    (void)p;
  } catch (const jinja::TemplateError&) {
  }
  return 0;
}

}  // namespace clover::chat::fuzz
