// A compiled Jinja template with HF transformers' rendering environment: trim_blocks,
// lstrip_blocks, loop controls, `{% generation %}`, tojson as json.dumps(ensure_ascii=False), and
// the globals raise_exception(msg), strftime_now(fmt), namespace(), range(), dict(), cycler(),
// joiner().
//
//   Template t(source);                       // throws TemplateError (with line and column)
//   std::string out = t.render(context_json); // throws TemplateError; e.raised for raise_exception
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/jinja/error.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/value.h"

namespace clover::chat::jinja {

struct TemplateOptions {
  LexerOptions lexer;  // HF defaults: trim_blocks and lstrip_blocks on
  RenderLimits limits;
  // strftime_now's clock, seconds since the epoch; defaults to the system clock (local time).
  std::function<int64_t()> now;
};

class Template {
 public:
  explicit Template(std::string_view source, TemplateOptions opt = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `context` must be a JSON object; its keys become template variables.
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const Value& context) const;

  const std::string& source() const;  // normalised (newlines, trailing newline)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace clover::chat::jinja
