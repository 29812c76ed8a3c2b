// Jinja parser: tokens -> statement tree, following jinja2's grammar and operator precedence
// (filters bind tighter than arithmetic; `a if c else b` lowest; chained comparisons).
// Unsupported statements (include, extends, block, import, ...) are reported at parse time with the
// line and column of the tag; unknown filters and tests when evaluated, as jinja2 3.1 does.
#pragma once
#include <string>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace clover::chat::jinja {

// `source` is the normalised source the tokens index (for error positions). Throws TemplateError.
Body parse(const std::vector<Token>& tokens, const std::string& source);

}  // namespace clover::chat::jinja
