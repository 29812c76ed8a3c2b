// The execution boundary: what a backend (the CPU today, a GPU next) implements so that the
// decoders, the engine and the server run on it unchanged.
//
// The boundary is the pass, not an op graph: a backend owns its sequences (attention KV cache,
// GDN conv window and recurrent state, snapshots of that state) and runs whole forward passes
// over them, however it likes inside (the CPU backend keeps its fused, llama.cpp-order regions).
//
//   Executor   makes sequences and runs a list of passes: one pass, or several sequences'
//              passes stacked into one (continuous batching);
//   Sequence   one sequence's state; n_past committed tokens; save/restore a recurrent snapshot
//              (guess-then-verify's rollback, prefix reuse), truncate the KV when nothing is
//              recurrent;
//   Pass       causal (prefill, AR step, commit, verify: appends to the sequence) or denoise (a
//              block against the committed prefix: the sequence is left unchanged), with the
//              rows of logits it wants and, back from the backend, that pass's own statistics.
//
// Rules every backend keeps (tests/backend/*):
//   - batch invariance: a pass's logits and the state it leaves never depend on which other
//     passes share the stacked pass, nor on how a long causal pass is chunked (the Vulkan
//     backend's chunked GDN scan keeps the second for cuts at multiples of 64 positions and for
//     every pass under 64 tokens, and rounds differently otherwise: docs/vulkan.md);
//   - a pass is validated before anything runs (ModelError naming the problem), so a failed pass
//     leaves every sequence as it was.
// How to add a backend: docs/backends.md.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/row_top.h"
#include "kernels/dtype.h"
#include "model/model.h"

namespace clover::backend {

// Which positions of a causal pass need logits.
enum class LogitRows { None, Last, All };

enum class PassKind {
  Causal,   // appends the tokens to the sequence: prefill, AR step, commit and verify passes
  Denoise,  // a block after the committed prefix, bidirectional inside; the sequence is unchanged
};

// The work of one pass (summed over layers and over the chunks of a long causal pass).
struct PassStats {
  int64_t tokens = 0;
  int64_t expert_rows = 0;       // (token, routed expert) pairs computed
  int64_t distinct_experts = 0;  // distinct routed experts whose weights were read (per layer, summed)
  PassStats& operator+=(const PassStats& o) {
    tokens += o.tokens, expert_rows += o.expert_rows, distinct_experts += o.distinct_experts;
    return *this;
  }
};

// The element types of the K and V caches (F32, F16 or Q8_0, as llama.cpp's -ctk / -ctv).
struct KvTypes {
  DType k = DType::F32, v = DType::F32;
};

// A copy of a sequence's recurrent state and of its length at the time (the attention cache is
// not copied: its rows below that length stay valid as long as the sequence starts with the same
// tokens). Storage is reused when the same snapshot is saved into again.
class Snapshot {
 public:
  virtual ~Snapshot() = default;
  virtual int n_past() const = 0;
  virtual size_t bytes() const = 0;
};

class Sequence {
 public:
  virtual ~Sequence() = default;
  virtual int n_past() const = 0;  // committed tokens
  virtual int n_ctx() const = 0;   // positions the KV cache holds
  virtual void reset() = 0;        // back to an empty sequence
  // Cuts the sequence back to n tokens (n <= n_past). Only a model without recurrent layers can
  // (their state cannot be rewound): otherwise throws ModelError; use restore().
  virtual void truncate(int n) = 0;
  virtual std::unique_ptr<Snapshot> new_snapshot() const = 0;
  virtual void save(Snapshot& into) const = 0;  // into: from new_snapshot() of this backend
  // Back to the snapshot's length and recurrent state. The KV rows below its length must not have
  // been overwritten since (true whenever the sequence went on from the snapshot's tokens).
  virtual void restore(const Snapshot& from) = 0;
  virtual size_t kv_bytes() const = 0;
  virtual size_t recurrent_bytes() const = 0;
  // The committed state as bytes, backend-neutral (for tests: equal states give equal bytes):
  // per attention layer K then V of positions [0, n_past) in the cache type, then per GDN layer
  // its conv window and recurrent state as floats.
  virtual std::vector<uint8_t> committed_state() const = 0;
};

struct Pass {
  Sequence* seq = nullptr;
  PassKind kind = PassKind::Causal;
  std::span<const int32_t> tokens;       // Causal: the new tokens; Denoise: the block
  LogitRows rows = LogitRows::Last;      // Causal: which rows get logits
  std::span<const int32_t> denoise_rows; // Denoise: ascending block positions that get logits; empty: all
  bool reverse_path = true;              // Denoise: add the reverse in-block GDN path
  // [rows][n_vocab]: Causal Last: one row; Causal All: a row per token; Denoise: a row per block
  // position (rows not in denoise_rows are unspecified scratch). May be null when top_k > 0.
  float* logits = nullptr;
  // Selection on the backend (sampling/row_top.h): with top_k in [1, kMaxTop], each wanted row's k best
  // entries and normaliser go to `top`, laid out as the logits rows are; the logits rows too when
  // `logits` is not null.
  int top_k = 0;
  sampling::RowTop* top = nullptr;
  PassStats stats;                       // out: this pass's work, written by the executor

  static Pass causal(Sequence& seq, std::span<const int32_t> tokens, LogitRows rows, float* logits) {
    Pass p;
    p.seq = &seq, p.kind = PassKind::Causal, p.tokens = tokens, p.rows = rows, p.logits = logits;
    return p;
  }
  static Pass denoise(Sequence& seq, std::span<const int32_t> block, std::span<const int32_t> rows, float* logits,
                      bool reverse_path) {
    Pass p;
    p.seq = &seq, p.kind = PassKind::Denoise, p.tokens = block, p.rows = LogitRows::All, p.denoise_rows = rows;
    p.logits = logits, p.reverse_path = reverse_path;
    return p;
  }
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string_view name() const = 0;  // "cpu", "vulkan:0 (NVIDIA H200)", ...
  virtual const model::Model& model() const = 0;
  // Whether the passes read the weights from the model file's bytes in host memory (the CPU), so
  // that bringing them into memory ahead of use pays (EngineOptions::prefault); a GPU backend
  // reads its uploaded copy.
  virtual bool reads_host_weights() const { return false; }
  // The most tokens one stacked pass holds (a lone causal pass may be longer: it is chunked).
  virtual int max_batch() const = 0;
  virtual int n_threads() const = 0;  // CPU threads the backend computes with
  // Throws ModelError when the cache types do not suit the model.
  virtual std::unique_ptr<Sequence> new_sequence(int n_ctx, KvTypes types) = 0;
  // Runs the passes: one alone, or several (each on a different sequence, their tokens together
  // within max_batch) stacked into one pass. Each pass gets its logits and its own statistics.
  // Validates everything first: ModelError before any sequence changes.
  virtual void run(std::span<Pass> passes) = 0;
  void run(Pass& pass) { run(std::span<Pass>(&pass, 1)); }
  // Debugging aid: every MoE routing decision as one line (backend/routing.h).
  virtual void trace_routing(std::FILE* f) = 0;
  // Where the weights are, in words (a GPU backend: which experts stay in RAM; empty on the CPU),
  // and the device memory the backend has allocated (0 on the CPU).
  virtual std::string placement() const { return {}; }
  virtual uint64_t device_memory_bytes() const { return 0; }
};

// What the sequences' caches need, by formula (the same for every backend).
size_t kv_bytes_for(const model::HParams& hp, int64_t n_ctx, KvTypes types);
size_t recurrent_bytes_for(const model::HParams& hp);
// Throws ModelError when the cache types do not suit the model (q8_0 needs a head dim that is a
// multiple of 32; only f32, f16, q8_0).
void check_kv_types(const model::HParams& hp, KvTypes types);
// The checks every backend makes of a pass's tokens (backend/pass_checks.cpp): at least one, all
// inside the vocabulary, and room for them in the sequence's context. ModelError otherwise.
void check_pass_tokens(const Pass& p, int n_vocab);
// The rows a pass wants, in order: the position in its tokens, and the row of `logits` / `top`
// that receives it (Last: 0; All: the position; Denoise: the block position).
struct WantedRow {
  int32_t pos, out;
};
std::vector<WantedRow> wanted_rows(const Pass& p);
// The rows of `logits` / `top` a pass's output spans (Last: 1; All and Denoise: its tokens).
int64_t output_rows(const Pass& p);
// That a pass which wants rows has somewhere to put them (logits and/or a selection of top_k in
// [1, kMaxTop] with its `top` array).
void check_pass_outputs(const Pass& p);
// And of a denoising pass (nothing for a causal one): rows ascending inside the block, the block
// within the largest pass, the reverse path only where the file has it.
void check_denoise_pass(const Pass& p, int max_batch, bool has_reverse_path);

struct ExecutorOptions {
  // The backend: "cpu", "vulkan" (the first GPU), "vulkan:N" (device N of `clover devices`, a
  // CPU-type device such as lavapipe included), or "auto": the first real GPU if there is one and
  // the model's weight types have shaders there, else the CPU.
  std::string device = "cpu";
  int n_gpu_layers = -1;       // -ngl: -1 or >= n_layer: every layer on the device; 0: the CPU; between: the
                               // first n_layer - N layers on the CPU, the rest on the device (layer_split.h)
  int n_threads = 0;           // 0: all cores
  int max_batch = 256;
  // Expert placement on a GPU backend (backend/placement.h; llama.cpp's flags). The CPU backend
  // has every weight in RAM already: it notes that they do nothing there.
  bool cpu_moe = false;                   // --cpu-moe
  int n_cpu_moe = 0;                      // --n-cpu-moe N
  std::vector<std::string> override_tensor;  // -ot REGEX=cpu|vulkan
  uint64_t vram_budget = 0;               // --vram-budget (bytes; 0: none)
  // --stream-experts N: experts in RAM with N or more routed rows in a pass are uploaded and
  // computed on the device (0: never; -1: the backend's default, kStreamExpertsDefaultRows on a
  // GPU, never on a CPU-type device such as lavapipe).
  int stream_experts = -1;
  // What the device must hold besides weights, for the placement: the sequences' caches.
  int64_t n_ctx = 4096;
  KvTypes kv;
  int n_seq = 1;
  // The CPU backend: repack the model's Q4_0, Q4_K, IQ4_XS and Q5_K matrices in place where they
  // are in private memory and the CPU has the layouts' kernels (model::Model::repack); its progress
  // (bytes).
  bool repack = true;
  std::function<void(uint64_t done, uint64_t total)> on_repack;
};

// Streaming experts kept in RAM to the device for passes with many rows routed to them: the
// default threshold on a GPU is llama.cpp's (it offloads host weights' products from batches of
// 32 rows on); not measured for clover.cpp yet (docs/placement.md). The device's staging buffers
// hold kStreamedExperts experts at a time.
inline constexpr int kStreamExpertsDefaultRows = 32;
inline constexpr int kStreamedExperts = 16;

// Picks and builds the backend (backend/select.cpp); the backend prepares the weights for itself
// (a GPU backend: uploads them; the CPU computes from the file's bytes, repacked in place when they
// were read into memory (ExecutorOptions::repack), otherwise as they are, which the engine brings
// into memory: EngineOptions::prefault) before returning.
std::unique_ptr<Executor> make_executor(model::Model& model, const ExecutorOptions& opts);

}  // namespace clover::backend
