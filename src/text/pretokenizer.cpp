#include "text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/tokenizer.h"
#include "text/unicode.h"

namespace clover::text {
namespace {

using unicode::CpClass;

// llama.cpp's patterns (src/llama-vocab.cpp, llm_tokenizer_bpe), as written there.
constexpr const char* kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// "default" is four stages; the second is GPT-2's pattern, which llama.cpp runs as a hand-written
// loop (gpt2_split below) rather than as a regex.
constexpr const char* kDefault1 = "[\\p{P}\\$\\+<=>\\^~\\|]+";
constexpr const char* kDefault3 = "\\p{N}+";
constexpr const char* kDefault4 = "[0-9][0-9][0-9]";

// The byte each class of codepoint >= 128 collapses to.
char collapsed_byte(CpClass c) {
  switch (c) {
    case CpClass::Whitespace:
      return char(0x0B);
    case CpClass::Number:
      return char(0xD1);
    case CpClass::Letter:
      return char(0xD2);
    case CpClass::Punct:
      return char(0xD3);
    case CpClass::Mark:
      return char(0xD4);
    case CpClass::Symbol:
      return char(0xD5);
    default:
      return char(0xD0);
  }
}

// \p{X} -> its collapsed byte plus its ASCII members (llama.cpp's k_ucat_map; note S lacks '~').
std::string collapse_pattern(std::string_view re) {
  struct Cat {
    std::string_view name, members;
  };
  static constexpr Cat cats[] = {
      {"\\p{N}", "\\x{D1}0-9"},
      {"\\p{L}", "\\x{D2}A-Za-z"},
      {"\\p{Lu}", "\\x{D2}A-Za-z"},
      {"\\p{Ll}", "\\x{D2}A-Za-z"},
      {"\\p{Lt}", "\\x{D2}A-Za-z"},
      {"\\p{Lm}", "\\x{D2}A-Za-z"},
      {"\\p{Lo}", "\\x{D2}A-Za-z"},
      {"\\p{P}", "\\x{D3}\\x21-\\x23\\x25-\\x2A\\x2C-\\x2F\\x3A-\\x3B\\x3F-\\x40\\x5B-\\x5D\\x5F\\x7B\\x7D"},
      {"\\p{M}", "\\x{D4}"},
      {"\\p{S}", "\\x{D5}\\x24\\x2B\\x3C-\\x3E\\x5E\\x60\\x7C"},
  };
  std::string out;
  bool inside = false;
  for (size_t i = 0; i < re.size(); ++i) {
    char c = re[i];
    bool escaped = i > 0 && re[i - 1] == '\\';
    if (c == '[' && !escaped) {
      inside = true;
    } else if (c == ']' && inside && !escaped) {
      inside = false;
    } else if (c == '\\') {
      bool replaced = false;
      for (const Cat& cat : cats) {
        if (re.substr(i, cat.name.size()) == cat.name) {
          out += inside ? "" : "[";
          out += cat.members;
          out += inside ? "" : "]";
          i += cat.name.size() - 1;
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
      out += c;  // copy the escaped character verbatim so `\[` is not seen as a bracket
      if (i + 1 < re.size()) out += re[++i];
      continue;
    }
    out += c;
  }
  return out;
}

class ByteRegex {
 public:
  explicit ByteRegex(std::string_view source) {
    std::string pat = collapse_pattern(source);
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), 0, &err, &off, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw TokenizerError("pre-tokenizer regex does not compile: " + std::string(reinterpret_cast<char*>(msg)) +
                           " in " + pat);
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~ByteRegex() { pcre2_code_free(code_); }
  ByteRegex(const ByteRegex&) = delete;
  ByteRegex& operator=(const ByteRegex&) = delete;

  // Splits every piece [begin, begin+len) of `s` into matches and the gaps between them.
  void split(const std::string& s, const std::vector<size_t>& in, std::vector<size_t>& out) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t begin = 0;
    for (size_t len : in) {
      auto subject = reinterpret_cast<PCRE2_SPTR>(s.data() + begin);
      size_t pos = 0, prev_end = 0;
      while (pos < len) {
        int rc = pcre2_match(code_, subject, len, pos, 0, md, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // cannot happen with these patterns; skip rather than loop
          pos = ms + 1;
          continue;
        }
        if (ms > prev_end) out.push_back(ms - prev_end);
        out.push_back(me - ms);
        prev_end = pos = me;
      }
      if (prev_end < len) out.push_back(len - prev_end);
      begin += len;
    }
    pcre2_match_data_free(md);
  }

 private:
  pcre2_code* code_ = nullptr;
};

// GPT-2's pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ as
// llama.cpp's loop (unicode_regex_split_custom_gpt2) evaluates it. Unassigned codepoints count as
// "other" there too; only a position past the end of the piece matches no class.
void gpt2_split(const std::vector<uint32_t>& cps, const std::vector<CpClass>& cls, const std::vector<size_t>& in,
                std::vector<size_t>& out) {
  enum class K { None, Space, Letter, Number, Other };
  size_t begin = 0;
  for (size_t len : in) {
    const size_t end = begin + len;
    auto cp = [&](size_t i) { return i < end ? cps[i] : 0xFFFFFFFFu; };
    auto kind = [&](size_t i) {
      if (i >= end) return K::None;
      switch (cls[i]) {
        case CpClass::Whitespace:
          return K::Space;
        case CpClass::Letter:
          return K::Letter;
        case CpClass::Number:
          return K::Number;
        default:
          return K::Other;
      }
    };
    size_t prev = begin;
    auto cut = [&](size_t at) {
      if (at > prev) out.push_back(at - prev);
      prev = at;
    };
    size_t pos = begin;
    while (pos < end) {
      const uint32_t c = cp(pos);
      if (c == '\'' && pos + 1 < end) {
        uint32_t n1 = cp(pos + 1);
        if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
          cut(pos += 2);
          continue;
        }
        if (pos + 2 < end) {
          uint32_t n2 = cp(pos + 2);
          if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
            cut(pos += 3);
            continue;
          }
        }
      }
      const K head = c == ' ' ? kind(pos + 1) : kind(pos);
      if (head == K::Letter || head == K::Number || head == K::Other) {
        pos += (c == ' ');
        while (kind(pos) == head) ++pos;
        cut(pos);
        continue;
      }
      size_t n_ws = 0;
      while (kind(pos + n_ws) == K::Space) ++n_ws;
      if (n_ws > 1 && pos + n_ws < end) {
        cut(pos += n_ws - 1);  // \s+(?!\S): leave the last space to the word after it
      } else if (n_ws > 0) {
        cut(pos += n_ws);
      } else {
        cut(++pos);
      }
    }
    begin = end;
  }
}

struct Stage {
  std::unique_ptr<ByteRegex> regex;  // null = GPT-2 loop
};

}  // namespace

struct PreTokenizer::Impl {
  std::string name;
  std::vector<Stage> stages;
};

bool PreTokenizer::known(std::string_view name) { return name == "qwen35" || name == "qwen2" || name == "default"; }

std::string PreTokenizer::source_regex(std::string_view name) {
  if (name == "qwen35") return kQwen35;
  if (name == "qwen2") return kQwen2;
  if (name == "default") return kDefault1;
  throw TokenizerError("unknown pre-tokenizer '" + std::string(name) + "'");
}

PreTokenizer::PreTokenizer(std::string_view name) : impl_(std::make_unique<Impl>()) {
  impl_->name = std::string(name);
  auto add = [&](const char* re) { impl_->stages.push_back(Stage{std::make_unique<ByteRegex>(re)}); };
  if (name == "qwen35") {
    add(kQwen35);
  } else if (name == "qwen2") {
    add(kQwen2);
  } else if (name == "default") {
    add(kDefault1);
    impl_->stages.push_back(Stage{});
    add(kDefault3);
    add(kDefault4);
  } else {
    throw TokenizerError("unknown pre-tokenizer '" + std::string(name) + "' (known: qwen35, qwen2, default)");
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

const std::string& PreTokenizer::name() const { return impl_->name; }

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  const std::vector<uint32_t> cps = unicode::decode_lenient(text);
  if (cps.empty()) return {};
  std::vector<CpClass> cls(cps.size());
  std::string collapsed(cps.size(), '\0');
  for (size_t i = 0; i < cps.size(); ++i) {
    cls[i] = unicode::classify(cps[i]);
    collapsed[i] = cps[i] < 128 ? char(cps[i]) : collapsed_byte(cls[i]);
  }
  std::vector<size_t> pieces{cps.size()}, next;
  for (const Stage& st : impl_->stages) {
    next.clear();
    if (st.regex) {
      st.regex->split(collapsed, pieces, next);
    } else {
      gpt2_split(cps, cls, pieces, next);
    }
    pieces.swap(next);
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t begin = 0;
  for (size_t len : pieces) {
    std::string w;
    for (size_t i = begin; i < begin + len; ++i) unicode::append_utf8(w, cps[i]);
    words.push_back(std::move(w));
    begin += len;
  }
  return words;
}

}  // namespace clover::text
