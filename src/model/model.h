// A loaded Clover / qwen35moe model: the mapped file, its hyperparameters, bound weights, the
// tokenizer and the chat template. Immutable after load (and after the backend's preparation of
// the weights, repack) and shared by every sequence.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "text/tokenizer.h"

namespace clover {
class ThreadPool;
}

namespace clover::model {

// What Model::repack rewrote.
struct RepackReport {
  int matrices = 0;    // tensors (a stack of experts counts once)
  uint64_t bytes = 0;  // their bytes
  double seconds = 0;
};

class Model {
 public:
  // Throws ModelError / gguf::GgufError / text::TokenizerError naming what is wrong. The weights
  // stay in the mapped file (or, with opts.mmap false, in the anonymous copy the reader made); a
  // backend prepares them for itself (backend::make_executor).
  static std::unique_ptr<Model> load(const std::string& path, const gguf::OpenOptions& opts = {});
  ~Model();

  const HParams& hp() const { return hp_; }
  const ModelWeights& weights() const { return w_; }
  const text::Tokenizer& tokenizer() const { return *tok_; }
  const std::string& chat_template() const { return chat_template_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  const gguf::Reader& file() const { return *file_; }
  size_t weight_bytes() const;
  // The bytes of the tensors the forward pass reads, in the order a decode step first needs them,
  // for bringing them into memory ahead of use (runtime/residency.h): first what every step reads
  // whole (each layer's norms, mixer, router and shared expert, in layer order; the output norm and
  // the LM head), then the routed experts layer by layer (a step reads 8 of 256 per layer), then
  // the embedding table (one row per token; with the LM head when the two are tied). Unused
  // tensors (MTP layers) are left out.
  std::vector<std::span<const uint8_t>> weights_in_use_order() const;
  // Throws ModelError when the mapped file has shrunk since load (truncated on disk): its weights
  // past the new end can no longer be read, and touching them would kill the process with SIGBUS.
  // The engine calls this before every pass it starts for a caller (one fstat).
  void check_file() const;

  // Rewrites, in place, the Q4_0, Q4_K, IQ4_XS and Q5_K matrices the forward pass multiplies
  // (every such tensor of 16-row tiles but the token embedding and an LM head tied to it) in the
  // CPU's AVX-512 kernels' layouts (Q4_0x16, Kx16: kernels/repack.h), and records the layout in
  // weights(): every reader handles it (each ISA's kernels; the scalar twin) and the products keep
  // their bits. Only for weights read into memory (--no-mmap): a mapped file is never written,
  // and nothing is repacked. `progress` gets bytes done of the bytes to repack. Call it before
  // any executor reads the weights. Only the layouts `isa`'s kernels read are written (AVX-512:
  // all; AVX2: Q4_0x16; kernels::repack_layout(m, isa)).
  RepackReport repack(ThreadPool& pool, const std::function<void(uint64_t done, uint64_t total)>& progress = {},
                      kernels::Isa isa = kernels::Isa::Avx512);
  const RepackReport& repacked() const { return repacked_; }

 private:
  Model() = default;
  std::unique_ptr<gguf::Reader> file_;
  HParams hp_;
  ModelWeights w_;
  std::unique_ptr<text::Tokenizer> tok_;
  std::string chat_template_;
  std::vector<std::string> warnings_;
  RepackReport repacked_;
};

// Reads the tokenizer.ggml.* keys.
text::VocabData read_vocab(const gguf::Reader& r);

}  // namespace clover::model
