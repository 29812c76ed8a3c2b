// vocab_gguf: writes a vocabulary-only qwen35moe GGUF from a Hugging Face tokenizer.json.
//   vocab_gguf TOKENIZER_JSON OUT.gguf [--pre qwen2|qwen35|default]
#include <cstdio>
#include <cstring>

#include "text/hf_tokenizer_json.h"
#include "vocab_gguf_writer.h"

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 5 && std::strcmp(argv[3], "--pre") == 0)) {
    std::fprintf(stderr, "usage: vocab_gguf TOKENIZER_JSON OUT.gguf [--pre qwen2|qwen35|default]\n");
    return 2;
  }
  try {
    clover::text::VocabData v = clover::text::vocab_from_hf_tokenizer_json(argv[1]);
    if (argc == 5) v.pre = argv[4];
    clover::text::Tokenizer::build(v);  // validate before writing
    clover::text::testing::write_vocab_gguf(v, argv[2]);
    std::printf("%s: %zu tokens, %zu merges, pre %s\n", argv[2], v.tokens.size(), v.merges.size(), v.pre.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vocab_gguf: %s\n", e.what());
    return 1;
  }
  return 0;
}
