// Token attributes as llama.cpp derives them at load time: from token_type, then adjusted by token
// text (control-looking end-of-generation and fill-in-the-middle tokens become control tokens,
// control tokens named "unused" are marked unused, ...). Which tokens are matched as special in raw
// text, and how a token is rendered, depends on these attributes rather than on token_type.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace clover::text {

// llama_token_attr bits.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

struct DerivedAttrs {
  std::vector<uint32_t> attr;  // per token
  std::vector<int32_t> eog;    // end-of-generation ids, sorted
};

// `texts` are the token texts as llama.cpp stores them (empty ones already renamed).
DerivedAttrs derive_token_attrs(const VocabData& data, const std::vector<std::string>& texts);

}  // namespace clover::text
