// A model file's chat template and its bos/eos token strings, for the subcommands that render
// conversations themselves (`clover template`, `clover run --chat`).
#pragma once
#include <string>

namespace clover::cli {

struct ModelTemplate {
  std::string source;  // tokenizer.chat_template
  std::string bos, eos;  // token texts; empty when the ids are absent
};

// Throws std::runtime_error naming the file when it has no tokenizer.chat_template.
ModelTemplate read_model_template(const std::string& path);

}  // namespace clover::cli
