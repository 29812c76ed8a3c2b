// clover vocab: learn a byte-level BPE vocabulary from a corpus and write it as a GGUF holding only
// the tokenizer.* keys (--train), or tokenise many texts at once with such a file (--encode), so
// that the training code tokenises exactly as the engine does without one process per text.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "synth/vocab.h"
#include "text/tokenizer.h"

namespace clover::cli {

namespace {

// Qwen's control tokens + the diffusion mask, then the tags Qwen3.5 marks as user-defined.
const std::vector<std::string> kControl = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"};
const std::vector<std::string> kUserDefined = {"<think>",     "</think>",        "<tool_call>",
                                               "</tool_call>", "<tool_response>", "</tool_response>"};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The corpus split at every special token's text: the specials get their own ids, so no merge may
// learn from them, and the pieces between them are the documents.
std::vector<std::string> split_at_specials(const std::string& text, const std::vector<std::string>& specials) {
  std::vector<std::string> docs;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    size_t hit = 0;
    for (const std::string& s : specials)
      if (text.compare(i, s.size(), s) == 0) hit = std::max(hit, s.size());
    if (hit == 0) {
      ++i;
      continue;
    }
    if (i > start) docs.push_back(text.substr(start, i - start));
    i += hit;
    start = i;
  }
  if (start < text.size()) docs.push_back(text.substr(start));
  return docs;
}

int32_t id_of(const text::VocabData& v, const std::string& s) {
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == s) return static_cast<int32_t>(i);
  throw std::logic_error("special token " + s + " missing from the trained vocabulary");
}

}  // namespace

Runner add_vocab_command(CLI::App& app) {
  struct Args {
    std::string train, model, encode, out;
    int merges = 4000;
    int pad_to = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("vocab", "train a BPE vocabulary (--train) or tokenise a batch of texts (--encode)");
  auto* tr = c->add_option("--train", a->train, "corpus text file (special token texts in it are skipped)");
  c->add_option("--merges", a->merges, "number of merges to learn (vocabulary = 256 + merges + 10 specials)");
  c->add_option("--pad-to", a->pad_to, "pad the vocabulary with unused tokens up to this size");
  auto* en = c->add_option("--encode", a->encode, "JSONL file, one JSON string per line; writes one JSON id array per line");
  c->add_option("-m,--model", a->model, "GGUF file whose vocabulary --encode uses");
  c->add_option("-o,--out", a->out, "output: VOCAB.gguf for --train, OUT.jsonl for --encode")->required();
  tr->excludes(en);
  return [a] {
    if (!a->train.empty()) {
      std::vector<std::string> specials = kControl;
      specials.insert(specials.end(), kUserDefined.begin(), kUserDefined.end());
      const std::vector<std::string> docs = split_at_specials(read_file(a->train), specials);
      text::VocabData v = text::train_bpe(docs, a->merges, specials, kUserDefined, a->pad_to, "qwen35");
      v.bos = id_of(v, "<|endoftext|>");
      v.eos = id_of(v, "<|im_end|>");
      v.pad = id_of(v, "<|endoftext|>");
      v.add_bos = false;
      text::Tokenizer::build(v);  // validates
      gguf::Writer w(a->out);
      synth::write_vocab(w, v);
      w.finish();
      std::fprintf(stderr, "%s: %zu tokens (%zu merges) from %zu documents\n", a->out.c_str(), v.tokens.size(),
                   v.merges.size(), docs.size());
      return 0;
    }
    if (a->encode.empty() || a->model.empty()) throw std::runtime_error("vocab: give --train, or --encode with -m");
    auto file = gguf::Reader::open(a->model);
    const text::Tokenizer tok = text::Tokenizer::build(model::read_vocab(*file));
    std::ifstream in(a->encode, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + a->encode);
    std::ofstream out(a->out, std::ios::binary);
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const std::vector<int32_t> ids = tok.encode(nlohmann::json::parse(line).get<std::string>(), true);
      out << nlohmann::json(ids).dump() << '\n';
      ++n;
    }
    if (!out) throw std::runtime_error("cannot write " + a->out);
    std::fprintf(stderr, "%s: %zu texts tokenised\n", a->out.c_str(), n);
    return 0;
  };
}

}  // namespace clover::cli
