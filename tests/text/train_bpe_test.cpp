// train_bpe(): layout of the vocabulary, determinism, and that the learned merges compress text.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "text/tokenizer.h"
#include "text/unicode.h"

namespace clover::text {
namespace {

std::vector<std::string> sample_corpus(int lines) {
  const char* words[] = {"the",   "model", "token", "weights", "quick", "brown", "fox",        "lazy", "dog",  "über",
                         "naïve", "你好",  "世界",  "😀",       "don't", "it's",  "x = y + 1;", "\n",   "    ", "12345"};
  std::vector<std::string> corpus;
  uint32_t state = 12345;
  for (int i = 0; i < lines; ++i) {
    std::string line;
    for (int w = 0; w < 12; ++w) {
      state = state * 1664525u + 1013904223u;
      line += (w ? " " : "") + std::string(words[(state >> 16) % 20]);
    }
    corpus.push_back(line + "\n");
  }
  return corpus;
}

TEST(TrainBpe, VocabularyLayout) {
  VocabData v =
      train_bpe(sample_corpus(200), 50, {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>"}, {"<think>"}, 512);
  EXPECT_EQ(v.pre, "qwen35");
  EXPECT_EQ(v.merges.size(), 50u);
  ASSERT_EQ(v.tokens.size(), 512u);
  ASSERT_EQ(v.types.size(), 512u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(v.tokens[size_t(b)], unicode::byte_to_unicode(uint8_t(b)));
  const size_t first_special = v.tokens.size() - 4 - (512 - (256 + 50 + 4));
  EXPECT_LE(first_special, 256u + 50u);
  Tokenizer t = Tokenizer::build(v);
  int32_t eot = t.find("<|endoftext|>"), think = t.find("<think>");
  ASSERT_GE(eot, 256);
  EXPECT_EQ(t.type(eot), TokenType::Control);
  EXPECT_EQ(t.type(think), TokenType::UserDefined);
  EXPECT_EQ(t.type(511), TokenType::Unused);
  EXPECT_EQ(v.tokens[511], "[PAD511]");
  EXPECT_EQ(t.encode("<|im_start|>the<think>", true).front(), t.find("<|im_start|>"));
}

TEST(TrainBpe, DeterministicAndCompressing) {
  std::vector<std::string> corpus = sample_corpus(500);
  VocabData a = train_bpe(corpus, 120, {"<|endoftext|>"}, {}, 0);
  VocabData b = train_bpe(corpus, 120, {"<|endoftext|>"}, {}, 0);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.merges, b.merges);
  Tokenizer t = Tokenizer::build(a);
  std::string text = corpus[3] + corpus[7];
  std::vector<int32_t> ids = t.encode(text, false);
  EXPECT_LT(ids.size() * 2, text.size());
  EXPECT_EQ(t.decode(ids), text);
}

TEST(TrainBpe, StopsWhenNothingIsLeftToMerge) {
  VocabData v = train_bpe({"ab ab ab"}, 1000, {}, {}, 0);
  EXPECT_EQ(v.merges.size(), 2u);  // "a b", then "Ġ ab"
  EXPECT_NO_THROW(Tokenizer::build(v));
}

TEST(TrainBpe, RejectsBadSpecials) {
  EXPECT_THROW(train_bpe({"x"}, 1, {"a"}, {}, 0), TokenizerError);         // already a byte token
  EXPECT_THROW(train_bpe({"x"}, 1, {"<s>"}, {"<t>"}, 0), TokenizerError);  // user-defined not a special
  EXPECT_THROW(train_bpe({"x"}, 1, {}, {}, 0, "nonsense"), TokenizerError);
}

// Pseudo-words from random syllables: many distinct words, so thousands of merges exist.
std::vector<std::string> syllable_corpus(int lines) {
  const char* syl[] = {"ka", "to", "ri", "mun", "el", "sa", "qua", "bre", "ix", "on", "de", "lu", "st", "ph", "ae",
                       "ng", "zo", "ti", "ve",  "ro", "日", "本",  "语",  "é",  "ß",  "42", ".",  ",",  "'s", "\n"};
  std::vector<std::string> corpus;
  uint32_t state = 7;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 16; };
  for (int i = 0; i < lines; ++i) {
    std::string line;
    for (int w = 0; w < 10; ++w) {
      line += " ";
      for (uint32_t k = 0, n = 1 + next() % 4; k < n; ++k) line += syl[next() % 30];
    }
    corpus.push_back(line);
  }
  return corpus;
}

// A few MB and a few thousand merges must train in seconds (the synthetic model writer does this).
TEST(TrainBpe, FastEnoughForMegabytes) {
  std::vector<std::string> corpus = syllable_corpus(60000);  // ~4 MB
  size_t bytes = 0;
  for (const auto& s : corpus) bytes += s.size();
  auto t0 = std::chrono::steady_clock::now();
  VocabData v = train_bpe(corpus, 3000, {"<|endoftext|>"}, {}, 0);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("train_bpe: %.1f MB, %zu merges in %.2f s\n", bytes / 1e6, v.merges.size(), s);
  EXPECT_EQ(v.merges.size(), 3000u);
  EXPECT_LT(s, 60.0);
}

}  // namespace
}  // namespace clover::text
