#include "chat/jinja/lexer.h"

#include <cstring>

#include "chat/jinja/error.h"
#include "chat/jinja/value.h"

namespace clover::chat::jinja {

TemplateError::TemplateError(std::string msg, int ln, int col, bool r)
    : std::runtime_error("template line " + std::to_string(ln) + ", column " + std::to_string(col) +
                         ": " + msg),
      message(std::move(msg)), line(ln), column(col), raised(r) {}

void line_column(std::string_view source, size_t pos, int& line, int& column) {
  line = 1;
  column = 1;
  for (size_t i = 0; i < pos && i < source.size(); ++i) {
    if (source[i] == '\n') { ++line; column = 1; }
    else ++column;
  }
}

std::string normalize_source(std::string_view source, const LexerOptions& opt) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!opt.keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(const std::string& src, const LexerOptions& opt) : s_(src), opt_(opt) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < s_.size()) {
      size_t t = find_tag(pos);
      if (t == std::string::npos) {
        emit(Token::Type::Data, s_.substr(pos), pos);
        break;
      }
      char kind = s_[t + 1];  // '{', '%' or '#'
      size_t after = t + 2;
      char sign = 0;
      if (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) sign = s_[after++];
      size_t raw_end = kind == '%' ? match_raw_begin(t) : 0;
      std::string text = s_.substr(pos, t - pos);
      strip_before(text, sign, kind != '{', line_starting);
      if (!text.empty()) emit(Token::Type::Data, std::move(text), pos);

      if (raw_end) {
        pos = lex_raw_body(raw_end, line_starting);
      } else if (kind == '#') {
        pos = lex_comment(t, after, line_starting);
      } else {
        pos = lex_tag(t, after, kind == '%', line_starting);
      }
    }
    tokens_.push_back({Token::Type::End, "", s_.size()});
    return std::move(tokens_);
  }

 private:
  const std::string& s_;
  const LexerOptions& opt_;
  std::vector<Token> tokens_;

  [[noreturn]] void fail(size_t pos, const std::string& msg) {
    int line, col;
    line_column(s_, pos, line, col);
    throw TemplateError(msg, line, col);
  }

  void emit(Token::Type t, std::string text, size_t pos) { tokens_.push_back({t, std::move(text), pos}); }

  size_t find_tag(size_t pos) const {
    for (size_t i = pos; i + 1 < s_.size(); ++i)
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  // Whitespace control of the text before a tag: `-` strips all trailing whitespace; otherwise
  // lstrip_blocks removes spaces between the line start and a block or comment tag.
  void strip_before(std::string& text, char sign, bool lstrip_kind, bool line_starting) const {
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0 && is_space(text[e - 1])) --e;
      text.resize(e);
    } else if (sign != '+' && opt_.lstrip_blocks && lstrip_kind) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
        bool all_ws = true;
        for (size_t i = l_pos; i < text.size(); ++i)
          if (!is_space(text[i])) { all_ws = false; break; }
        if (all_ws) text.resize(l_pos);
      }
    }
  }

  // `{%[-+]? raw [-]?%}` at t: returns the offset after it, or 0.
  size_t match_raw_begin(size_t t) const {
    size_t i = t + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    while (i < s_.size() && is_space(s_[i])) ++i;
    if (s_.compare(i, 3, "raw") != 0) return 0;
    i += 3;
    if (i < s_.size() && is_name_char(s_[i])) return 0;
    while (i < s_.size() && is_space(s_[i])) ++i;
    if (s_.compare(i, 3, "-%}") == 0) {
      i += 3;
      while (i < s_.size() && is_space(s_[i])) ++i;
      return i;
    }
    if (s_.compare(i, 2, "%}") == 0) return i + 2;
    return 0;
  }

  // Block-end whitespace handling shared by comments, tags and raw: returns the position after the
  // end marker and its trailing whitespace.
  size_t after_end(size_t end_pos, size_t marker_len, char sign, bool trim_newline) const {
    size_t i = end_pos + marker_len;
    if (sign == '-') {
      while (i < s_.size() && is_space(s_[i])) ++i;
    } else if (sign != '+' && trim_newline && i < s_.size() && s_[i] == '\n') {
      ++i;
    }
    return i;
  }

  size_t lex_raw_body(size_t start, bool& line_starting) {
    line_starting = s_[start - 1] == '\n';
    if (start == s_.size()) return start;  // jinja2 accepts a bare {% raw %} at the very end
    for (size_t i = start; i + 1 < s_.size(); ++i) {
      if (s_[i] != '{' || s_[i + 1] != '%') continue;
      size_t j = i + 2;
      char sign = 0;
      if (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) sign = s_[j++];
      while (j < s_.size() && is_space(s_[j])) ++j;
      if (s_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < s_.size() && is_space(s_[j])) ++j;
      char end_sign = 0;
      if (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) end_sign = s_[j++];
      if (s_.compare(j, 2, "%}") != 0) continue;
      std::string text = s_.substr(start, i - start);
      strip_before(text, sign, true, line_starting);
      if (!text.empty()) emit(Token::Type::Data, std::move(text), start);
      size_t next = after_end(j, 2, end_sign, opt_.trim_blocks);
      line_starting = s_[next - 1] == '\n';
      return next;
    }
    fail(start, "Missing end of raw directive");
  }

  size_t lex_comment(size_t t, size_t content, bool& line_starting) {
    size_t e = s_.find("#}", content);
    if (e == std::string::npos) fail(t, "Missing end of comment tag");
    char sign = 0;
    size_t marker = e;
    if (e > content && (s_[e - 1] == '-' || s_[e - 1] == '+')) { sign = s_[e - 1]; marker = e - 1; }
    size_t next = after_end(marker, sign ? 3 : 2, sign, opt_.trim_blocks);
    line_starting = s_[next - 1] == '\n';
    return next;
  }

  size_t lex_tag(size_t t, size_t i, bool block, bool& line_starting) {
    emit(block ? Token::Type::BlockBegin : Token::Type::VarBegin, "", t);
    std::string brackets;
    while (true) {
      while (i < s_.size() && is_space(s_[i])) ++i;
      if (i >= s_.size())
        fail(t, block ? "unexpected end of template: missing '%}'" : "unexpected end of template: missing '}}'");
      if (brackets.empty()) {
        const char* end = block ? "%}" : "}}";
        char sign = 0;
        size_t m = i;
        if ((s_[i] == '-' || (block && s_[i] == '+')) && s_.compare(i + 1, 2, end) == 0) { sign = s_[i]; m = i + 1; }
        if (s_.compare(m, 2, end) == 0) {
          emit(block ? Token::Type::BlockEnd : Token::Type::VarEnd, "", i);
          size_t next = after_end(m, 2, sign, block && opt_.trim_blocks);
          line_starting = s_[next - 1] == '\n';
          return next;
        }
      }
      char c = s_[i];
      size_t start = i;
      if (is_digit(c) && !(i > 0 && s_[i - 1] == '.')) {
        i = lex_number(i);
      } else if (is_digit(c)) {
        // After a dot (x.0): an integer only.
        while (i < s_.size() && (is_digit(s_[i]) || s_[i] == '_')) ++i;
        emit(Token::Type::Integer, strip_underscores(s_.substr(start, i - start)), start);
      } else if (is_name_start(c)) {
        while (i < s_.size() && is_name_char(s_[i])) ++i;
        emit(Token::Type::Name, s_.substr(start, i - start), start);
      } else if (c == '\'' || c == '"') {
        i = lex_string(i);
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                    "(", ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};
        const char* op = nullptr;
        for (const char* o : ops)
          if (s_.compare(i, std::strlen(o), o) == 0) { op = o; break; }
        if (!op) fail(i, std::string("unexpected char '") + c + "'");
        std::string o(op);
        if (o == "(") brackets += ')';
        else if (o == "[") brackets += ']';
        else if (o == "{") brackets += '}';
        else if (o == ")" || o == "]" || o == "}") {
          if (brackets.empty()) fail(i, "unexpected '" + o + "'");
          if (brackets.back() != o[0]) fail(i, "unexpected '" + o + "', expected '" + brackets.back() + "'");
          brackets.pop_back();
        }
        i += o.size();
        emit(Token::Type::Operator, o, start);
      }
    }
  }

  static std::string strip_underscores(std::string s) {
    std::string out;
    for (char c : s)
      if (c != '_') out += c;
    return out;
  }

  // Digits with single underscores between them: returns the end, or `i` when none.
  size_t digits(size_t i) const {
    size_t j = i;
    if (j >= s_.size() || !is_digit(s_[j])) return i;
    while (j < s_.size() && is_digit(s_[j])) {
      ++j;
      if (j + 1 < s_.size() && s_[j] == '_' && is_digit(s_[j + 1])) ++j;
    }
    return j;
  }

  // jinja2's number rules: floats need a fraction or an exponent; integers are 0b/0o/0x literals,
  // decimals without leading zeros, or zero ("01" lexes as 0 then 1, a syntax error later).
  size_t lex_number(size_t i) {
    size_t start = i;
    size_t e = digits(i);
    bool is_float = false;
    if (e < s_.size() && s_[e] == '.' && digits(e + 1) > e + 1) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t k = e + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      size_t d = digits(k);
      if (d > k) { e = d; is_float = true; }
    }
    if (is_float) {
      emit(Token::Type::Float, strip_underscores(s_.substr(start, e - start)), start);
      return e;
    }
    if (s_[i] == '0' && i + 1 < s_.size()) {
      char b = static_cast<char>(s_[i + 1] | 0x20);
      int base = b == 'b' ? 2 : b == 'o' ? 8 : b == 'x' ? 16 : 0;
      if (base) {
        size_t j = i + 2;
        uint64_t v = 0;
        bool any = false, overflow = false;
        while (j < s_.size()) {
          if (s_[j] == '_' && any && j + 1 < s_.size() && hex_val(s_[j + 1]) >= 0 && hex_val(s_[j + 1]) < base) { ++j; continue; }
          int h = hex_val(s_[j]);
          if (h < 0 || h >= base) break;
          overflow = overflow || v > (UINT64_MAX >> 4);
          v = v * base + h;
          any = true;
          ++j;
        }
        if (any) {
          if (overflow || v > static_cast<uint64_t>(INT64_MAX)) fail(start, "integer literal too large");
          emit(Token::Type::Integer, std::to_string(v), start);
          return j;
        }
      }
      // Zero, possibly as 0_0_0.
      size_t j = i + 1;
      while (j + 1 < s_.size() && s_[j] == '_' && s_[j + 1] == '0') j += 2;
      while (j < s_.size() && s_[j] == '0') ++j;
      emit(Token::Type::Integer, "0", start);
      return j;
    }
    emit(Token::Type::Integer, strip_underscores(s_.substr(start, e - start)), start);
    return e;
  }

  // Quoted string with Python's unicode-escape rules.
  size_t lex_string(size_t i) {
    char q = s_[i];
    size_t start = i++;
    std::string out;
    while (true) {
      if (i >= s_.size()) fail(start, "unexpected end of string");
      char c = s_[i];
      if (c == q) break;
      if (c != '\\') { out += c; ++i; continue; }
      if (i + 1 >= s_.size()) fail(start, "unexpected end of string");
      char e = s_[i + 1];
      i += 2;
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'N': fail(start, "\\N{...} escapes are not supported");
        case 'x': case 'u': case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            int h = i < s_.size() ? hex_val(s_[i]) : -1;
            if (h < 0) fail(start, std::string("invalid \\") + e + " escape in string");
            cp = cp * 16 + h;
            ++i;
          }
          if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) fail(start, "invalid code point in string escape");
          utf8_append(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = e - '0';
            for (int k = 0; k < 2 && i < s_.size() && s_[i] >= '0' && s_[i] <= '7'; ++k) cp = cp * 8 + (s_[i++] - '0');
            utf8_append(out, cp);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    emit(Token::Type::String, std::move(out), start);
    return i + 1;
  }
};

}  // namespace

std::vector<Token> tokenize(const std::string& src, const LexerOptions& opt) { return Lexer(src, opt).run(); }

}  // namespace clover::chat::jinja
