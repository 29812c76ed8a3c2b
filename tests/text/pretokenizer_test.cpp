// Pre-tokenizer splits, written out from the regexes (and llama.cpp's loops) by hand.
#include "text/pretokenizer.h"

#include <gtest/gtest.h>

#include "text/tokenizer.h"
#include "text/unicode.h"

namespace clover::text {
namespace {

using Words = std::vector<std::string>;

Words split(const char* pre, std::string_view text) { return PreTokenizer(pre).split(text); }

TEST(PreTokenizer, Qwen35Basics) {
  EXPECT_EQ(split("qwen35", "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split("qwen35", "it's IT'S we'RE"), (Words{"it", "'s", " IT", "'S", " we", "'RE"}));
  EXPECT_EQ(split("qwen35", "2024"), (Words{"2", "0", "2", "4"}));
  EXPECT_EQ(split("qwen35", "x = 12;"), (Words{"x", " =", " ", "1", "2", ";"}));
  EXPECT_EQ(split("qwen35", "hello!!!\nnext"), (Words{"hello", "!!!\n", "next"}));
  EXPECT_EQ(split("qwen35", "a  \n\n  b"), (Words{"a", "  \n\n", " ", " b"}));
  EXPECT_EQ(split("qwen35", "end   "), (Words{"end", "   "}));
  EXPECT_EQ(split("qwen35", "  lead"), (Words{" ", " lead"}));
  EXPECT_EQ(split("qwen35", "\tx"), (Words{"\tx"}));
  EXPECT_EQ(split("qwen35", "你好世界"), (Words{"你好世界"}));
  EXPECT_EQ(split("qwen35", "a😀😀b"), (Words{"a", "😀😀", "b"}));
  EXPECT_TRUE(split("qwen35", "").empty());
}

TEST(PreTokenizer, MarksJoinLettersOnlyInQwen35) {
  const std::string decomposed = "Cafe\xCC\x81 ok";  // e + U+0301 COMBINING ACUTE
  EXPECT_EQ(split("qwen35", decomposed), (Words{"Cafe\xCC\x81", " ok"}));
  EXPECT_EQ(split("qwen2", decomposed), (Words{"Cafe", "\xCC\x81", " ok"}));
  // A mark standing alone before punctuation.
  EXPECT_EQ(split("qwen35", "\xCC\x81!"), (Words{"\xCC\x81", "!"}));
}

TEST(PreTokenizer, UnicodeWhitespace) {
  // U+00A0 and U+3000 are white space; U+0085 too (Unicode White_Space), as in llama.cpp.
  EXPECT_EQ(split("qwen35",
                  "a\xC2\xA0\xC2\xA0"
                  "b"),
            (Words{"a", "\xC2\xA0",
                   "\xC2\xA0"
                   "b"}));
  EXPECT_EQ(split("qwen35", "a\xC2\x85"), (Words{"a", "\xC2\x85"}));
  EXPECT_EQ(split("qwen35", "x\xE3\x80\x80\n"), (Words{"x", "\xE3\x80\x80\n"}));
}

TEST(PreTokenizer, InvalidUtf8BecomesReplacementCharacters) {
  // Each invalid byte decodes to U+FFFD (a symbol), as llama.cpp's unicode_cpts_from_utf8 does.
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(split("qwen35",
                  "a\xFF"
                  "b"),
            (Words{"a", fffd + "b"}));
  EXPECT_EQ(split("qwen35", "\x80\x80"), (Words{fffd + fffd}));
  EXPECT_EQ(split("qwen35", "ok\xE4\xBD"), (Words{"ok", fffd + fffd}));  // truncated sequence
  // Overlong forms are accepted and normalised: C0 80 is U+0000.
  EXPECT_EQ(split("qwen35", std::string("\xC0\x80", 2)), (Words{std::string(1, '\0')}));
}

TEST(PreTokenizer, DefaultIsFourStages) {
  EXPECT_EQ(split("default", "Hello world"), (Words{"Hello", " world"}));
  // Stage 1 isolates punctuation runs before GPT-2's pattern sees them: "'s" is cut.
  EXPECT_EQ(split("default", "it's"), (Words{"it", "'", "s"}));
  // Stage 3 + 4: digit runs, then groups of three.
  EXPECT_EQ(split("default", "x 12345"), (Words{"x", " ", "123", "45"}));
  EXPECT_EQ(split("default", "a  b"), (Words{"a", " ", " b"}));
}

TEST(PreTokenizer, UnknownNameIsAnError) {
  EXPECT_THROW(PreTokenizer("llama3"), TokenizerError);
  EXPECT_TRUE(PreTokenizer::known("qwen2"));
  EXPECT_FALSE(PreTokenizer::known("gpt2"));
}

TEST(Unicode, ByteAlphabetRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(unicode::unicode_to_byte(unicode::byte_to_unicode(uint8_t(b))), b);
  }
  EXPECT_EQ(unicode::byte_to_unicode(' '), "\xC4\xA0");   // 'Ġ'
  EXPECT_EQ(unicode::byte_to_unicode('\n'), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(unicode::byte_to_unicode('A'), "A");
}

TEST(Unicode, Classes) {
  using unicode::CpClass;
  EXPECT_EQ(unicode::classify('a'), CpClass::Letter);
  EXPECT_EQ(unicode::classify('7'), CpClass::Number);
  EXPECT_EQ(unicode::classify(' '), CpClass::Whitespace);
  EXPECT_EQ(unicode::classify('!'), CpClass::Punct);
  EXPECT_EQ(unicode::classify('+'), CpClass::Symbol);
  EXPECT_EQ(unicode::classify(0x4F60), CpClass::Letter);  // 你
  EXPECT_EQ(unicode::classify(0x0301), CpClass::Mark);
  EXPECT_EQ(unicode::classify(0x0663), CpClass::Number);     // ARABIC-INDIC DIGIT THREE
  EXPECT_EQ(unicode::classify(0x1F600), CpClass::Symbol);    // 😀
  EXPECT_EQ(unicode::classify(0x0378), CpClass::Undefined);  // unassigned
  // Unicode 15.0/15.1 additions, classed as llama.cpp's (15.1) tables class them.
  EXPECT_EQ(unicode::classify(0x31350), CpClass::Letter);  // CJK extension H
  EXPECT_EQ(unicode::classify(0x2EBF0), CpClass::Letter);  // CJK extension I
  EXPECT_EQ(unicode::classify(0x11F50), CpClass::Number);  // Kawi digit zero
  EXPECT_EQ(unicode::classify(0x0CF3), CpClass::Mark);
  EXPECT_EQ(unicode::classify(0x1FA75), CpClass::Symbol);
  EXPECT_EQ(unicode::classify(0x323B0), CpClass::Undefined);  // just past extension H
  EXPECT_EQ(unicode::classify(0x110000), CpClass::Undefined);
}

}  // namespace
}  // namespace clover::text
