// The tokenizer of synthetic models: a byte-level BPE learned from a small built-in corpus, with
// Qwen's special tokens and <|mask|>, padded with unused tokens to the requested size.
#pragma once
#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "text/tokenizer.h"

namespace clover::synth {

text::VocabData synthetic_vocab(int n_vocab);
text::VocabData hf_vocab(const std::string& tokenizer_json_path);
void write_vocab(gguf::Writer& w, const text::VocabData& v);
std::string_view qwen35_chat_template();  // assets/templates/Qwen3.5.jinja, embedded at build time

}  // namespace clover::synth
