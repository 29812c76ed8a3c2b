// The few Unicode facts the byte-level BPE tokenizer needs, defined the way llama.cpp defines them:
// its lenient UTF-8 decoder, its per-codepoint classes and the GPT-2 byte-to-unicode alphabet.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace clover::text::unicode {

// Codepoint classes as llama.cpp's pre-tokenizer sees them. Whitespace is Unicode's White_Space
// property and wins over the general category; Other is any other assigned codepoint (C*, Z*
// except white space, surrogates); Undefined is unassigned (Cn) or beyond U+10FFFF.
enum class CpClass : uint8_t { Undefined, Whitespace, Letter, Number, Mark, Punct, Symbol, Other };

// Categories come from PCRE2's Unicode tables plus the Unicode 15.0/15.1 additions that llama.cpp
// v0.5.0's tables (Unicode 15.1) have and Debian 12's PCRE2 (Unicode 14) lacks. The table is filled
// lazily, 256 codepoints at a time, and is safe to use from several threads.
CpClass classify(uint32_t cp);

// llama.cpp's decoder: a lead byte with the right number of continuation bytes decodes (overlong
// forms and surrogates are accepted, F5..F7 leads give codepoints above U+10FFFF); any other byte
// decodes to U+FFFD and decoding resumes at the next byte.
std::vector<uint32_t> decode_lenient(std::string_view s);

// Appends the UTF-8 form of cp; codepoints above U+10FFFF (where llama.cpp throws) become U+FFFD.
void append_utf8(std::string& out, uint32_t cp);

// Number of bytes a UTF-8 sequence starting with `lead` claims (1 for continuation/invalid bytes).
int utf8_seq_len(uint8_t lead);

// GPT-2 byte-to-unicode alphabet: the UTF-8 text of the character standing for byte b.
const std::string& byte_to_unicode(uint8_t b);
// Inverse for one character (1-2 UTF-8 bytes); -1 when it stands for no byte.
int unicode_to_byte(std::string_view ch);
// Whole strings: every byte mapped / every character mapped back. from_byte_level returns false
// (leaving out partially filled) if a character is not in the alphabet.
std::string to_byte_level(std::string_view bytes);
bool from_byte_level(std::string_view text, std::string& out);

}  // namespace clover::text::unicode
