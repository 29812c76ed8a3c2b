// Byte-level BPE tokenizer (GPT-2 style, as GGUF `tokenizer.ggml.model = "gpt2"`), with the
// `qwen35`, `qwen2` and `default` pre-tokenizers, special/added tokens and streaming detokenisation.
// Must tokenise exactly as llama.cpp v0.5.0 does for the same vocabulary.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace clover::text {

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// Everything the GGUF tokenizer keys hold; filled by the model loader or by train_bpe().
struct VocabData {
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens (GPT-2 byte-to-unicode alphabet)
  std::vector<int32_t> types;        // tokenizer.ggml.token_type (TokenType values); may be empty = all Normal
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "A B", rank = index
  std::string pre = "default";       // tokenizer.ggml.pre
  int32_t bos = -1, eos = -1, eot = -1, pad = -1;
  bool add_bos = false;
};

struct TokenizerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  // Validates the data (unknown pre-tokenizer, merges naming unknown tokens, ...) and throws
  // TokenizerError naming the problem.
  static Tokenizer build(VocabData data);

  // parse_special: control tokens written literally in the text become their ids (llama.cpp's
  // `parse_special`). User-defined tokens always do, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  // Concatenated bytes of the tokens (special tokens rendered as their text when render_special).
  std::string decode(const std::vector<int32_t>& ids, bool render_special = true) const;
  // Raw bytes of one token (may be a partial UTF-8 sequence).
  std::string token_bytes(int32_t id) const;

  int32_t n_vocab() const;
  int32_t find(std::string_view token_text) const;  // -1 when absent
  TokenType type(int32_t id) const;
  bool is_control(int32_t id) const;
  // The texts encode() matches as one token only with parse_special (control and unknown tokens).
  std::vector<std::string> control_texts() const;
  // End-of-generation: eos, eot, <|im_end|>, <|endoftext|> when present.
  bool is_eog(int32_t id) const;
  int32_t bos() const;
  int32_t eos() const;
  bool add_bos() const;
  const VocabData& data() const;

  // Turns a token stream into text chunks that never split a UTF-8 character; bytes that never
  // complete a character are flushed as U+FFFD at the end.
  class StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& tok, bool render_special = true);
    std::string push(int32_t id);  // complete characters available so far
    std::string flush();           // whatever remains
   private:
    const Tokenizer* tok_;
    bool render_special_;
    std::string pending_;
  };

  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Learns a byte-level BPE vocabulary from a corpus (for synthetic and trained tiny models):
// 256 byte tokens, then up to n_merges merges (most frequent pair first, ties broken
// deterministically), then `specials` as Control tokens (or UserDefined for the names in
// `user_defined`), then "[PAD<i>]" Unused tokens up to pad_to (if larger). Uses the given
// pre-tokenizer to split words, so the merges never cross pre-token boundaries.
VocabData train_bpe(const std::vector<std::string>& corpus, int n_merges, const std::vector<std::string>& specials,
                    const std::vector<std::string>& user_defined, int32_t pad_to, const std::string& pre = "qwen35");

}  // namespace clover::text
