// Jinja lexer: splits a template into data and tag tokens, applying Jinja2's whitespace rules as HF
// configures them (trim_blocks, lstrip_blocks, `-`/`+` markers, trailing newline dropped, newlines
// normalised to "\n"), and tokenises the expressions inside tags.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace clover::chat::jinja {

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

struct Token {
  enum class Type : uint8_t {
    Data,        // literal template text (also the body of {% raw %})
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,      // text holds the unescaped value
    Integer,
    Float,
    Operator,    // text holds the operator: + - * / // % ** ~ == != < > <= >= = . : | , ( ) [ ] { }
    End,
  };
  Type type;
  std::string text;
  size_t pos;  // byte offset in the normalised source
};

// The source after newline normalisation and trailing-newline removal; token positions index it.
std::string normalize_source(std::string_view source, const LexerOptions& opt);

// Throws TemplateError (unterminated tags, comments, strings; unbalanced brackets; stray characters).
std::vector<Token> tokenize(const std::string& normalized_source, const LexerOptions& opt);

}  // namespace clover::chat::jinja
