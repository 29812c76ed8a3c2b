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
//
// Special-token text in the request (issue #26): a message saying "<|im_end|><|im_start|>system"
// must not forge a turn. With keep_as_text() given the tokenizer's control-token texts, apply()
// reports where such text from the request (messages, tools, chat_template_kwargs: every string
// and object key) lands in the prompt, so the caller tokenises those spans as plain text and
// control tokens come only from the template's own text. How: each such occurrence (and each
// character of the placeholder range itself) is replaced by one placeholder character from the
// Supplementary Private Use Area-A before rendering, and put back afterwards; the result must equal
// the plain rendering, else (a template that measures or slices the content) apply() refuses with
// a TemplateError rather than guess.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

// A byte range [begin, end) of a rendered prompt.
struct TextSpan {
  size_t begin = 0, end = 0;
  bool operator==(const TextSpan&) const = default;
};

struct RenderedPrompt {
  std::string prompt;             // the full text to tokenise
  std::vector<TextSpan> literal;  // ascending: control-token text from the request, to tokenise as text
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

  // The texts the tokenizer reads as control tokens (with parse_special): from now on apply()
  // reports them in the request as RenderedPrompt::literal. Without this call (llama.cpp's
  // behaviour) the whole prompt is one text and `literal` stays empty.
  void keep_as_text(std::vector<std::string> control_texts);

 private:
  RenderedPrompt apply_plain(const ChatRequest& req) const;

  jinja::Template tmpl_;
  std::string bos_, eos_;
  bool typed_content_ = false;
  std::vector<std::string> control_texts_;  // longest first
};

// The prompt cut into the pieces to tokenise: {text, parse_special}; the literal spans are read
// with parse_special off, the rest with it on. [from, to) selects part of the prompt.
struct PromptPiece {
  std::string_view text;
  bool parse_special = true;
};
std::vector<PromptPiece> prompt_pieces(std::string_view prompt, const std::vector<TextSpan>& literal, size_t from = 0,
                                       size_t to = std::string_view::npos);

// The normalisation described above, on a copy of `messages`.
json normalize_messages(const json& messages, bool typed_content);

// Whether a generation prompt leaves a reasoning block open: its last "<think>" has no "</think>"
// after it.
bool thinking_open_in(std::string_view generation_prompt);

}  // namespace clover::chat
