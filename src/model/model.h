// A loaded Clover / qwen35moe model: the mapped file, its hyperparameters, bound weights, the
// tokenizer and the chat template. Immutable after load and shared by every sequence.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/hparams.h"
#include "model/weights.h"
#include "text/tokenizer.h"

namespace clover::gguf {
class Reader;
}

namespace clover::model {

class Model {
 public:
  // Throws ModelError / gguf::GgufError / text::TokenizerError naming what is wrong. The weights
  // stay in the mapped file; a backend prepares them for itself (backend::make_executor).
  static std::unique_ptr<Model> load(const std::string& path);
  ~Model();

  const HParams& hp() const { return hp_; }
  const ModelWeights& weights() const { return w_; }
  const text::Tokenizer& tokenizer() const { return *tok_; }
  const std::string& chat_template() const { return chat_template_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  const gguf::Reader& file() const { return *file_; }
  size_t weight_bytes() const;
  // Throws ModelError when the mapped file has shrunk since load (truncated on disk): its weights
  // past the new end can no longer be read, and touching them would kill the process with SIGBUS.
  // The engine calls this before every pass it starts for a caller (one fstat).
  void check_file() const;

 private:
  Model() = default;
  std::unique_ptr<gguf::Reader> file_;
  HParams hp_;
  ModelWeights w_;
  std::unique_ptr<text::Tokenizer> tok_;
  std::string chat_template_;
  std::vector<std::string> warnings_;
};

// Reads the tokenizer.ggml.* keys.
text::VocabData read_vocab(const gguf::Reader& r);

}  // namespace clover::model
