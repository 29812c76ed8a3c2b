// Tokenizer on small hand-built vocabularies: merges by rank, special tokens, decoding, streaming.
#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <thread>

#include "text/unicode.h"

namespace clover::text {
namespace {

using Ids = std::vector<int32_t>;

// 256 byte tokens (id = byte), then one token per merge (in order), then `specials`.
VocabData make_vocab(const std::vector<std::pair<std::string, std::string>>& merges,
                     const std::vector<std::pair<std::string, TokenType>>& specials = {}, const char* pre = "qwen35") {
  VocabData v;
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(unicode::byte_to_unicode(uint8_t(b)));
  for (const auto& [a, b] : merges) {
    std::string la = unicode::to_byte_level(a), lb = unicode::to_byte_level(b);
    v.merges.push_back(la + " " + lb);
    v.tokens.push_back(la + lb);
  }
  v.types.assign(v.tokens.size(), int32_t(TokenType::Normal));
  for (const auto& [text, type] : specials) {
    v.tokens.push_back(text);
    v.types.push_back(int32_t(type));
  }
  return v;
}

Ids bytes_of(std::string_view s) {
  Ids ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(Tokenizer, MergesApplyByRank) {
  // "b c" has the better rank: abc -> a + bc.
  Tokenizer t1 = Tokenizer::build(make_vocab({{"b", "c"}, {"a", "b"}}));
  EXPECT_EQ(t1.encode("abc", false), (Ids{'a', 256}));
  // Reversed ranks: abc -> ab + c.
  Tokenizer t2 = Tokenizer::build(make_vocab({{"a", "b"}, {"b", "c"}}));
  EXPECT_EQ(t2.encode("abc", false), (Ids{256, 'c'}));
}

TEST(Tokenizer, LeftmostWinsOnEqualRank) {
  Tokenizer t = Tokenizer::build(make_vocab({{"a", "a"}, {"aa", "aa"}}));
  EXPECT_EQ(t.encode("aaa", false), (Ids{256, 'a'}));
  EXPECT_EQ(t.encode("aaaa", false), (Ids{257}));
  EXPECT_EQ(t.encode("aaaaa", false), (Ids{257, 'a'}));
}

TEST(Tokenizer, MergesStayInsidePreTokens) {
  Tokenizer t = Tokenizer::build(make_vocab({{"o", " "}, {" ", "w"}}));
  // "o w" pre-tokenizes to "o" + " w": the "o " merge never applies.
  EXPECT_EQ(t.encode("o w", false), (Ids{'o', 257}));
}

TEST(Tokenizer, SpecialTokens) {
  Tokenizer t = Tokenizer::build(make_vocab({{"h", "i"}}, {{"<|im_start|>", TokenType::Control},
                                                           {"<think>", TokenType::UserDefined},
                                                           {"<|im_start|>x", TokenType::Control}}));
  const int32_t im = 257, think = 258, imx = 259;
  // Control tokens only with parse_special; user-defined always.
  EXPECT_EQ(t.encode("<|im_start|>hi", true), (Ids{im, 256}));
  Ids raw = bytes_of("<|im_start|>");
  raw.push_back(256);
  EXPECT_EQ(t.encode("<|im_start|>hi", false), raw);
  EXPECT_EQ(t.encode("hi<think>hi", false), (Ids{256, think, 256}));
  // Longest special text first.
  EXPECT_EQ(t.encode("<|im_start|>x<|im_start|>", true), (Ids{imx, im}));
  // Text around specials is pre-tokenized separately: no word spans a special token.
  EXPECT_EQ(t.encode(" <think> ", true), (Ids{' ', think, ' '}));
}

TEST(Tokenizer, ControlLookingTokensAreControlAndEog) {
  // Typed Normal in the file, but llama.cpp treats these texts as control, end-of-generation tokens.
  Tokenizer t = Tokenizer::build(make_vocab({}, {{"<|im_end|>", TokenType::Normal},
                                                 {"<|endoftext|>", TokenType::Control},
                                                 {"<|fim_pad|>", TokenType::UserDefined},
                                                 {"<tool_call>", TokenType::UserDefined}}));
  EXPECT_TRUE(t.is_control(256));
  EXPECT_TRUE(t.is_eog(256));
  EXPECT_TRUE(t.is_eog(257));
  EXPECT_TRUE(t.is_control(258));  // FIM texts are promoted to control...
  EXPECT_TRUE(t.is_eog(258));      // ...and fim_pad ends generation
  EXPECT_FALSE(t.is_control(259));
  EXPECT_FALSE(t.is_eog(259));
  EXPECT_EQ(t.type(256), TokenType::Normal);
  EXPECT_EQ(t.encode("<|im_end|>", false), bytes_of("<|im_end|>"));
  EXPECT_EQ(t.encode("<|im_end|>", true), (Ids{256}));
}

TEST(Tokenizer, DecodeAndRenderSpecial) {
  Tokenizer t = Tokenizer::build(make_vocab(
      {{"h", "i"}},
      {{"<|im_start|>", TokenType::Control}, {"<think>", TokenType::UserDefined}, {"[PAD3]", TokenType::Unused}}));
  Ids ids{257, 256, 258, ' ', 259};
  EXPECT_EQ(t.decode(ids, true), "<|im_start|>hi<think> ");
  EXPECT_EQ(t.decode(ids, false), "hi<think> ");
  EXPECT_EQ(t.token_bytes(' '), " ");
  EXPECT_EQ(t.token_bytes(259), "");  // unused tokens render as nothing, as in llama.cpp
  EXPECT_THROW(t.token_bytes(1000), TokenizerError);
}

TEST(Tokenizer, RoundTrip) {
  Tokenizer t = Tokenizer::build(make_vocab({{"t", "h"}, {"th", "e"}, {" ", "the"}, {"\xC3", "\xA4"}}));
  for (const std::string& s :
       std::vector<std::string>{"the theme of the day", "  spaced\t\ttabs\n\n\r\n", "äöü 你好 😀 e\xCC\x81",
                                std::string("nul\0byte", 8), "\x7F\x01"}) {
    EXPECT_EQ(t.decode(t.encode(s, false)), s);
  }
}

TEST(Tokenizer, InvalidUtf8IsReplacedNotFatal) {
  Tokenizer t = Tokenizer::build(make_vocab({}));
  // Each invalid byte becomes U+FFFD (EF BF BD), as in llama.cpp.
  EXPECT_EQ(t.decode(t.encode("a\xFF"
                              "b\xC3",
                              false)),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_EQ(t.decode(t.encode(std::string("\xED\xA0\x80", 3), false)), "\xED\xA0\x80");  // surrogate kept
  EXPECT_EQ(t.decode(t.encode("\xF7\xBF\xBF\xBF", false)), "\xEF\xBF\xBD");              // > U+10FFFF
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise.push_back(char((i * 167 + 13) & 0xFF));
  EXPECT_FALSE(t.encode(noise, true).empty());
}

// Strict UTF-8 check (no overlong forms, surrogates or codepoints above U+10FFFF).
bool well_formed_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    auto b = [&](size_t k) { return k < s.size() ? uint8_t(s[k]) : 0; };
    uint8_t c = b(i);
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((b(i + k) & 0xC0) != 0x80) return false;
    }
    if ((c == 0xE0 && b(i + 1) < 0xA0) || (c == 0xED && b(i + 1) > 0x9F) || (c == 0xF0 && b(i + 1) < 0x90) ||
        (c == 0xF4 && b(i + 1) > 0x8F)) {
      return false;
    }
    i += len;
  }
  return true;
}

// Random bytes through every pre-tokenizer: no crash, and decoding gives back the input with each
// invalid byte replaced as llama.cpp's decoder replaces it.
TEST(Tokenizer, RandomBytesRoundTripModuloReplacement) {
  uint32_t state = 99;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 16; };
  for (const char* pre : {"qwen35", "qwen2", "default"}) {
    Tokenizer t = Tokenizer::build(make_vocab({{"\xC3", "\xA4"}, {" ", "a"}}, {{"<|x|>", TokenType::Control}}, pre));
    for (int i = 0; i < 300; ++i) {
      std::string s;
      for (uint32_t k = 0, n = next() % 64; k < n; ++k) {
        uint32_t r = next();
        s.push_back(char(r % 3 == 0 ? 0x80 + r % 128 : r % 3 == 1 ? " \n\ta1'<|x>"[r % 12] : r % 256));
      }
      std::string normalised;
      for (uint32_t cp : unicode::decode_lenient(s)) unicode::append_utf8(normalised, cp);
      for (bool special : {false, true}) {
        std::vector<int32_t> ids = t.encode(s, special);
        EXPECT_EQ(t.decode(ids), normalised) << pre << " #" << i;  // specials are ASCII: cuts never split a character
        Tokenizer::StreamDecoder sd(t);
        std::string streamed;
        for (int32_t id : ids) streamed += sd.push(id);
        streamed += sd.flush();
        EXPECT_TRUE(well_formed_utf8(streamed)) << pre << " #" << i;
      }
    }
  }
}

TEST(Tokenizer, StreamDecoderNeverSplitsCharacters) {
  Tokenizer t = Tokenizer::build(make_vocab({}));
  const std::string text = "a你😀b";
  Tokenizer::StreamDecoder sd(t);
  std::string out;
  std::vector<std::string> chunks;
  for (int32_t id : t.encode(text, false)) {  // one token per byte here
    std::string c = sd.push(id);
    if (!c.empty()) chunks.push_back(c);
    out += c;
  }
  out += sd.flush();
  EXPECT_EQ(out, text);
  EXPECT_EQ(chunks, (std::vector<std::string>{"a", "你", "😀", "b"}));

  Tokenizer::StreamDecoder partial(t);
  EXPECT_EQ(partial.push(0xE4), "");
  EXPECT_EQ(partial.push(0xBD), "");
  EXPECT_EQ(partial.flush(), "\xEF\xBF\xBD");  // never completed
  Tokenizer::StreamDecoder bad(t);
  EXPECT_EQ(bad.push(0xFF), "\xEF\xBF\xBD");  // can never start a character
  EXPECT_EQ(bad.push('x'), "x");
}

TEST(Tokenizer, BuildValidates) {
  VocabData v = make_vocab({{"a", "b"}});
  v.pre = "nonsense";
  EXPECT_THROW(Tokenizer::build(v), TokenizerError);
  v = make_vocab({{"a", "b"}});
  v.merges.push_back("x zz");
  EXPECT_THROW(Tokenizer::build(v), TokenizerError);
  v = make_vocab({});
  v.tokens.push_back("a");  // duplicate of byte token 'a'
  v.types.push_back(1);
  EXPECT_THROW(Tokenizer::build(v), TokenizerError);
  v = make_vocab({});
  v.types.pop_back();
  EXPECT_THROW(Tokenizer::build(v), TokenizerError);
  v = make_vocab({});
  v.eos = 100000;
  EXPECT_THROW(Tokenizer::build(v), TokenizerError);
  EXPECT_THROW(Tokenizer::build(VocabData{}), TokenizerError);
}

TEST(Tokenizer, ConcurrentEncodeIsSafe) {
  // encode() is const and shares the lazily filled codepoint-class table between threads.
  Tokenizer t = Tokenizer::build(make_vocab({{"t", "h"}, {"th", "e"}}));
  std::vector<std::string> texts;
  for (uint32_t base : {0x0400u, 0x3040u, 0x4E00u, 0xAC00u, 0x1F300u, 0x0900u, 0x10400u, 0x1D400u}) {
    std::string s = "the ";
    for (uint32_t k = 0; k < 600; k += 7) unicode::append_utf8(s, base + k);
    texts.push_back(s);
  }
  std::vector<std::vector<int32_t>> results(texts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < texts.size(); ++i) threads.emplace_back([&, i] { results[i] = t.encode(texts[i], true); });
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(results[i], t.encode(texts[i], true));
    EXPECT_EQ(t.decode(results[i]), texts[i]);
  }
}

TEST(Tokenizer, Lookups) {
  VocabData v = make_vocab({{"h", "i"}}, {{"<|im_end|>", TokenType::Control}});
  v.eos = 257;
  Tokenizer t = Tokenizer::build(v);
  EXPECT_EQ(t.n_vocab(), 258);
  EXPECT_EQ(t.find("hi"), 256);
  EXPECT_EQ(t.find("nope"), -1);
  EXPECT_EQ(t.eos(), 257);
  EXPECT_EQ(t.bos(), -1);
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.data().merges.size(), 1u);
}

}  // namespace
}  // namespace clover::text
