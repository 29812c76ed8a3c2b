#include "cli/model_template.h"

#include <stdexcept>
#include <vector>

#include "gguf/gguf.h"

namespace clover::cli {

ModelTemplate read_model_template(const std::string& path) {
  auto file = gguf::Reader::open(path);
  auto tmpl = file->get_str_opt("tokenizer.chat_template");
  if (!tmpl) throw std::runtime_error(path + " has no tokenizer.chat_template");
  ModelTemplate mt;
  mt.source = *tmpl;
  if (!file->has("tokenizer.ggml.tokens")) return mt;
  std::vector<std::string> tokens = file->get_str_array("tokenizer.ggml.tokens");
  auto token = [&](const char* key) -> std::string {
    auto id = file->get_u32_opt(key);
    return id && *id < tokens.size() ? tokens[*id] : std::string();
  };
  mt.bos = token("tokenizer.ggml.bos_token_id");
  mt.eos = token("tokenizer.ggml.eos_token_id");
  return mt;
}

}  // namespace clover::cli
