// Prompt rendering: OpenAI chat messages -> the exact prompt text a model's chat template produces
// under HF transformers' apply_chat_template.
//
// The request is normalised first, as llama.cpp does, so common OpenAI inputs render instead of
// failing inside the template:
//   - role "developer" becomes "system";
//   - `reasoning` is accepted as an alias of `reasoning_content` on assistant messages;
//   - tool_calls[].function.arguments given as a JSON string is parsed into an object (Qwen3.5's
//     template iterates it with |items);
//   - for templates that cannot render typed content (probed once: a text part must appear in the
//     output), content parts are joined into one string (text parts, "\n"-separated) and null or
//     missing content becomes "".
// Template variables: messages, tools (null when absent), documents (null), add_generation_prompt,
// bos_token, eos_token, then every chat_template_kwargs entry (enable_thinking, ...).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/jinja/template.h"

namespace clover::chat {

using json = nlohmann::ordered_json;

struct ChatRequest {
  json messages = json::array();  // OpenAI messages
  json tools;                     // null or an array of {"type":"function","function":{...}}
  json kwargs = json::object();   // chat_template_kwargs
  bool add_generation_prompt = true;
};

struct RenderedPrompt {
  std::string prompt;             // the full text to tokenise
  std::string generation_prompt;  // what add_generation_prompt appended (e.g. "<|im_start|>assistant\n<think>\n")
  bool thinking_open = false;     // the generation prompt opened a <think> block: output starts in reasoning
};

class ChatTemplate {
 public:
  // Throws jinja::TemplateError when the source does not parse.
  explicit ChatTemplate(std::string_view source, std::string bos_token = "", std::string eos_token = "");

  // Throws jinja::TemplateError (e.raised: the template's own raise_exception, a client error).
  RenderedPrompt apply(const ChatRequest& req) const;
  std::string render(const ChatRequest& req) const;

  // The template variables render() passes (after normalisation).
  json context(const ChatRequest& req) const;
  bool supports_typed_content() const { return typed_content_; }

 private:
  jinja::Template tmpl_;
  std::string bos_, eos_;
  bool typed_content_ = false;
};

// The normalisation described above, on a copy of `messages`.
json normalize_messages(const json& messages, bool typed_content);

// Whether a generation prompt leaves a reasoning block open: its last "<think>" has no "</think>"
// after it.
bool thinking_open_in(std::string_view generation_prompt);

}  // namespace clover::chat
