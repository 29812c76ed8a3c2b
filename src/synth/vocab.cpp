#include "synth/vocab.h"

#include <fmt/format.h>
#include <stdexcept>

#include "text/hf_tokenizer_json.h"

namespace clover::synth {

namespace {

// Text the synthetic tokenizer learns its merges from: a little English, code, JSON and the chat
// format, so that tokenisation of typical prompts exercises merges of every kind.
constexpr std::string_view kCorpus[] = {
    "The quick brown fox jumps over the lazy dog. The dog sleeps in the sun, and the fox runs into the forest.",
    "Once upon a time there was a little model that learned to write. It wrote one token at a time, then many at once.",
    "What is the capital of Australia? One word. Canberra. What is the capital of France? Paris.",
    "Is it warmer in Lisbon or in Oslo? Let me check the weather in both cities before I answer the question.",
    "Dispatch drone 7 to map the north field, then send drone 12 with medical supplies to the clinic at 14:30.",
    "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i, add(i, i))\n",
    "int main(int argc, char** argv) {\n  std::printf(\"hello %d\\n\", argc);\n  return 0;\n}\n",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lisbon\", \"unit\": \"celsius\"}}",
    "[{\"order\": 1, \"type\": \"mapping\", \"drone\": \"D-07\"}, {\"order\": 2, \"type\": \"delivery\", \"drone\": \"D-12\"}]",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nThe user greets me. I should answer briefly.\n</think>\n\nHello! How can I help you today?",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 2024 3.14159 -17 1e-6 65536.",
    "It's a test; they're here, we've seen it, I'm sure you'll like it, he'd agree.",
    "Über naïve café: déjà vu. 日本語のテキスト。中文文本。 Emoji: 🙂🚀✨",
    "    indented line\n\ttabbed line\n\n\nseveral newlines   and   spaces",
};

}  // namespace

text::VocabData synthetic_vocab(int n_vocab) {
  std::vector<std::string> corpus;
  for (int rep = 0; rep < 3; ++rep)
    for (auto s : kCorpus) corpus.emplace_back(s);
  const std::vector<std::string> control = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"};
  const std::vector<std::string> user_defined = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"};
  std::vector<std::string> specials = control;
  specials.insert(specials.end(), user_defined.begin(), user_defined.end());
  const int fixed = 256 + static_cast<int>(specials.size());
  if (n_vocab < fixed)
    throw std::invalid_argument(fmt::format("vocabulary of {} tokens is too small: 256 bytes + {} special tokens need {}", n_vocab,
                                            specials.size(), fixed));
  const int n_merges = std::min(n_vocab - fixed, 2000);
  text::VocabData v = text::train_bpe(corpus, n_merges, specials, user_defined, n_vocab, "qwen35");
  auto id = [&](std::string_view s) {
    for (size_t i = 0; i < v.tokens.size(); ++i)
      if (v.tokens[i] == s) return static_cast<int32_t>(i);
    throw std::logic_error(fmt::format("special token {} missing from the synthetic vocabulary", s));
  };
  v.bos = id("<|endoftext|>");
  v.eos = id("<|im_end|>");
  v.pad = id("<|endoftext|>");
  v.add_bos = false;
  return v;
}

text::VocabData hf_vocab(const std::string& path) {
  text::VocabData v = text::vocab_from_hf_tokenizer_json(path);
  auto find = [&](std::string_view s) {
    for (size_t i = 0; i < v.tokens.size(); ++i)
      if (v.tokens[i] == s) return static_cast<int32_t>(i);
    return int32_t{-1};
  };
  if (v.eos < 0) v.eos = find("<|im_end|>");
  if (v.bos < 0) v.bos = find("<|endoftext|>");
  if (v.pad < 0) v.pad = find("<|endoftext|>");
  return v;
}

void write_vocab(gguf::Writer& w, const text::VocabData& v) {
  using gguf::Value;
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str(v.pre));
  w.set("tokenizer.ggml.tokens", Value::str_array(v.tokens));
  std::vector<int32_t> types = v.types;
  if (types.empty()) types.assign(v.tokens.size(), 1);
  w.set("tokenizer.ggml.token_type", Value::i32_array(types));
  w.set("tokenizer.ggml.merges", Value::str_array(v.merges));
  if (v.bos >= 0) w.set("tokenizer.ggml.bos_token_id", Value::u32(v.bos));
  if (v.eos >= 0) w.set("tokenizer.ggml.eos_token_id", Value::u32(v.eos));
  if (v.eot >= 0) w.set("tokenizer.ggml.eot_token_id", Value::u32(v.eot));
  if (v.pad >= 0) w.set("tokenizer.ggml.padding_token_id", Value::u32(v.pad));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(v.add_bos));
}

}  // namespace clover::synth
