// Errors of the Jinja interpreter. Every error names the template line and column (1-based) it
// comes from; `raised` marks a template's own raise_exception(), which a server reports as a client
// error (HTTP 400) rather than an internal one.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace clover::chat::jinja {

struct TemplateError : std::runtime_error {
  TemplateError(std::string message, int line, int column, bool raised = false);
  std::string message;  // without the position
  int line = 0;
  int column = 0;
  bool raised = false;
};

// Line and column (1-based, column in bytes) of byte offset `pos` in `source`.
void line_column(std::string_view source, size_t pos, int& line, int& column);

}  // namespace clover::chat::jinja
