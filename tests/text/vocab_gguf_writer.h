// Writes a vocabulary-only qwen35moe GGUF: every metadata key llama.cpp requires for the
// architecture (small made-up hyperparameters), the tokenizer keys, and no tensors. llama.cpp loads
// such a file with vocab_only, which is all the tokenizer oracle needs.
#pragma once
#include <string>

#include "text/tokenizer.h"

namespace clover::text::testing {

void write_vocab_gguf(const VocabData& v, const std::string& path);

}  // namespace clover::text::testing
