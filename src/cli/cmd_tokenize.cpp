// clover tokenize: text -> token ids (JSON array).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "text/tokenizer.h"

namespace clover::cli {

Runner add_tokenize_command(CLI::App& app) {
  struct Args {
    std::string model, text, text_file;
    bool special = false, pieces = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("tokenize", "print the token ids of a text as a JSON array");
  c->add_option("-m,--model", a->model, "GGUF model file (only its vocabulary is read)")->required();
  auto* t = c->add_option("--text", a->text, "text to tokenize");
  auto* f = c->add_option("--file", a->text_file, "read the text from a file");
  t->excludes(f);
  c->add_flag("--special", a->special, "parse special tokens written in the text");
  c->add_flag("--pieces", a->pieces, "also print each token's text");
  return [a] {
    std::string text = a->text;
    if (!a->text_file.empty()) {
      FILE* in = std::fopen(a->text_file.c_str(), "rb");
      if (!in) throw std::runtime_error("cannot open " + a->text_file);
      char buf[65536];
      size_t n;
      text.clear();
      while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) text.append(buf, n);
      std::fclose(in);
    }
    auto file = gguf::Reader::open(a->model);
    const text::Tokenizer tok = text::Tokenizer::build(model::read_vocab(*file));
    std::vector<int32_t> ids = tok.encode(text, a->special);
    nlohmann::json out = ids;
    if (a->pieces) {
      nlohmann::json j;
      j["tokens"] = ids;
      j["pieces"] = nlohmann::json::array();
      for (int32_t id : ids) j["pieces"].push_back(tok.token_bytes(id));  // invalid UTF-8 is replaced when printed
      out = std::move(j);
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  };
}

}  // namespace clover::cli
