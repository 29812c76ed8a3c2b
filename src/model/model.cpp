#include "model/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "gguf/gguf.h"
#include "model/weight_checks.h"

namespace clover::model {

text::VocabData read_vocab(const gguf::Reader& r) {
  text::VocabData v;
  const std::string model = r.get_str_opt("tokenizer.ggml.model").value_or("");
  if (model != "gpt2")
    throw ModelError(fmt::format("tokenizer.ggml.model is '{}'; only byte-level BPE ('gpt2') is supported", model));
  v.tokens = r.get_str_array("tokenizer.ggml.tokens");
  if (r.has("tokenizer.ggml.token_type")) {
    for (int64_t t : r.get_int_array("tokenizer.ggml.token_type")) v.types.push_back(static_cast<int32_t>(t));
    if (v.types.size() != v.tokens.size())
      throw ModelError(fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens", v.types.size(), v.tokens.size()));
  }
  v.merges = r.get_str_array("tokenizer.ggml.merges");
  v.pre = r.get_str_opt("tokenizer.ggml.pre").value_or("default");
  auto id = [&](const char* key) -> int32_t {
    auto x = r.get_u32_opt(key);
    if (!x) return -1;
    if (*x >= v.tokens.size()) throw ModelError(fmt::format("{} = {} is outside the vocabulary ({} tokens)", key, *x, v.tokens.size()));
    return static_cast<int32_t>(*x);
  };
  v.bos = id("tokenizer.ggml.bos_token_id");
  v.eos = id("tokenizer.ggml.eos_token_id");
  v.eot = id("tokenizer.ggml.eot_token_id");
  v.pad = id("tokenizer.ggml.padding_token_id");
  v.add_bos = r.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(false);
  return v;
}

std::unique_ptr<Model> Model::load(const std::string& path, const gguf::OpenOptions& opts) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = gguf::Reader::open(path, opts);
  const gguf::Reader& r = *m->file_;
  m->hp_ = read_hparams(r, m->warnings_);
  m->tok_ = std::make_unique<text::Tokenizer>(text::Tokenizer::build(read_vocab(r)));
  if (m->tok_->n_vocab() != m->hp_.n_vocab)
    throw ModelError(fmt::format("vocabulary has {} tokens but the metadata implies {}", m->tok_->n_vocab(), m->hp_.n_vocab));
  m->w_ = bind_weights(r, m->hp_, m->warnings_);
  check_finite_weights(r);
  m->chat_template_ = r.get_str_opt("tokenizer.chat_template").value_or("");

  HParams& hp = m->hp_;
  if (hp.mask_token < 0) hp.mask_token = m->tok_->find("<|mask|>");
  if (hp.mask_token >= hp.n_vocab)
    throw ModelError(fmt::format("diffusion.mask_token_id {} is outside the vocabulary ({} tokens)", hp.mask_token, hp.n_vocab));

  return m;
}

Model::~Model() = default;

// Why a size check and not a recovery: the weights are read straight from the shared mapping by
// the kernels on every thread of the pool, so a SIGBUS cannot be turned into an error for one
// pass safely (a jump out of a signal handler would leave the pool and the sequence state
// half-written). What can be done is to notice, before a pass starts, that the file is shorter
// than the mapping (one fstat), and refuse that pass with an error naming the file. A truncation
// in the middle of a pass is still fatal; `clover serve` reports it by name (see its SIGBUS
// handler) instead of dying silently.
void Model::check_file() const {
  const uint64_t now = file_->size_on_disk();
  if (now < file_->file_size())
    throw ModelError(fmt::format("the model file {} was truncated to {} bytes after it was loaded ({} bytes); its weights "
                                 "cannot be read any more: restore the file and restart",
                                 file_->path(), now, file_->file_size()));
}

size_t Model::weight_bytes() const {
  size_t n = 0;
  for (const auto& t : file_->tensors()) n += t.size;
  return n;
}

std::vector<std::span<const uint8_t>> Model::weights_in_use_order() const {
  // Rank of a tensor: (pass, layer); ties keep file order.
  struct Ranked {
    int pass, layer;
    const gguf::TensorInfo* t;
  };
  std::vector<Ranked> ranked;
  for (const gguf::TensorInfo& t : file_->tensors()) {
    int layer = -1;
    if (t.name.rfind("blk.", 0) == 0) {
      layer = std::atoi(t.name.c_str() + 4);
      if (layer >= hp_.n_layer) continue;  // MTP layers
    }
    int pass = 0;
    if (t.name == "token_embd.weight") pass = w_.tied_output ? 0 : 2, layer = hp_.n_layer;
    else if (layer < 0) layer = hp_.n_layer;  // output norm, LM head
    else if (t.name.find("_exps.") != std::string::npos) pass = 1;
    ranked.push_back({pass, layer, &t});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Ranked& a, const Ranked& b) { return a.pass != b.pass ? a.pass < b.pass : a.layer < b.layer; });
  std::vector<std::span<const uint8_t>> out;
  out.reserve(ranked.size());
  for (const Ranked& r : ranked) out.emplace_back(r.t->data, r.t->size);
  return out;
}

}  // namespace clover::model
