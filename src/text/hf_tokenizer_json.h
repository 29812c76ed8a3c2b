// Import of a Hugging Face tokenizer.json (byte-level BPE model) into VocabData, the way llama.cpp's
// converter lays the vocabulary out in a GGUF.
#pragma once
#include <string>

#include "text/tokenizer.h"

namespace clover::text {

// Reads `path` (a tokenizer.json) and, when present next to it, tokenizer_config.json for the
// bos/eos/pad tokens and add_bos_token.
//  - tokens: model.vocab by id, added_tokens on top; ids nobody uses become "[PAD<id>]" (Unused).
//  - types: added tokens are Control when `special` or when they look special ("<|...|>", as the
//    converter's does_token_look_special), else UserDefined; the rest Normal.
//  - merges: "a b" strings or [a, b] pairs, rank = position.
//  - pre: the Split regex of the pre_tokenizer: Qwen2's -> "qwen2", Qwen3.5's (with \p{M}) ->
//    "qwen35"; anything else is an error.
// Throws TokenizerError naming the problem (not BPE, unknown regex, bad ids, ...).
VocabData vocab_from_hf_tokenizer_json(const std::string& path);

}  // namespace clover::text
