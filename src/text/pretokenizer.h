// Pre-tokenizers: split raw text into the words BPE works on, exactly as llama.cpp v0.5.0 does.
//
// What llama.cpp does: decode the text leniently (each invalid byte -> U+FFFD), give every codepoint
// a class from its own Unicode tables (White_Space wins over the category; unassigned codepoints
// are "other"), and split with the pattern. For qwen2, qwen35 and GPT-2's pattern it runs
// hand-written loops equivalent to the regex; for the rest it runs std::regex over a "collapsed"
// text where each codepoint >= 128 becomes one byte naming its class (white space -> 0x0B,
// N -> 0xD1, L -> 0xD2, P -> 0xD3, M -> 0xD4, S -> 0xD5, other -> 0xD0) and each \p{X} in the
// pattern becomes that byte plus X's ASCII members. We use the collapsed form for all patterns,
// matched by PCRE2 in byte mode (plus a loop for GPT-2's pattern, as llama.cpp), so \s, classes,
// invalid UTF-8 and overlong forms behave as there (classes: see unicode::classify).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace clover::text {

class PreTokenizer {
 public:
  // "qwen35", "qwen2" or "default"; throws TokenizerError for anything else.
  explicit PreTokenizer(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  static bool known(std::string_view name);
  const std::string& name() const;

  // The words of `text` in order, each as UTF-8 bytes (invalid input bytes already replaced by
  // U+FFFD, overlong forms normalised); concatenated they give the normalised text.
  std::vector<std::string> split(std::string_view text) const;

  // The regex exactly as llama.cpp states it for this pre-tokenizer (first stage for "default").
  static std::string source_regex(std::string_view name);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace clover::text
