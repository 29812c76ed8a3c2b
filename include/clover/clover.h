// clover.cpp engine API: models, sessions, prompts, tokens and events.
//
// This is the only header the CLI, the server and the benchmarks include. It speaks of text and
// token ids, never of tensors: how the forward pass is computed stays behind it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace clover {

// Every failure of the engine (bad file, bad request, context overflow) is an Error whose message
// names the problem.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ModelInfo {
  std::string path;
  std::string architecture;  // general.architecture
  std::string layout;        // official / llama-clover / qwen35moe, in words
  int n_layer = 0, n_attn_layers = 0, n_gdn_layers = 0;
  int n_embd = 0, n_vocab = 0, n_ctx_train = 0;
  int n_expert = 0, n_expert_used = 0;
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;
  std::string weight_type;   // the tensor type holding most of the file's bytes (Q4_0, Q8_0, F32...)
  bool can_denoise = false;  // has the reverse in-block path (official layout)
  std::string device;        // the backend running the model: "cpu", "vulkan:0 (NVIDIA H200)", ...
  std::string placement;     // a GPU backend: which experts stay in RAM and the device memory planned
  uint64_t device_memory_bytes = 0;  // a GPU backend: device memory allocated at load
  uint64_t repacked_bytes = 0;       // weights rewritten in place for the CPU's kernels (EngineOptions::repack)
  bool read_direct = false;          // --no-mmap: the file was read with O_DIRECT (gguf::OpenOptions)
  int block_size = 32;
  float threshold = 0.95f;
  int mask_token = -1;
  std::vector<std::string> warnings;  // non-fatal findings at load

  // The context every session gets (from EngineOptions): positions, KV cache element types, and the
  // memory one session's cache takes (attention KV, growing with n_ctx; GDN state, constant).
  int n_ctx = 0;
  std::string cache_type_k, cache_type_v;  // "f32", "f16" or "q8_0"
  uint64_t kv_cache_bytes = 0, recurrent_state_bytes = 0;
};

// Element type of the attention KV cache (llama.cpp's -ctk / -ctv). F16 halves the memory of F32
// at a measured cost below 1e-2 in the logits (docs/long-context.md); F32 is exact (oracle tests).
enum class CacheType { F32, F16, Q8_0 };
// "f32", "f16", "q8_0" (case-insensitive); throws Error naming the accepted names otherwise.
CacheType cache_type_from_name(std::string_view name);
std::string_view cache_type_name(CacheType t);
// One line for load messages: "context 131072 tokens, KV cache f16/f16 2.50 GiB, recurrent state 30.1 MiB".
std::string context_summary(const ModelInfo& info);

// Progress of long operations: done out of total, with a short label.
using ProgressFn = std::function<void(std::string_view label, uint64_t done, uint64_t total)>;

// Progress as lines on stderr, each label every `every_percent` (for 1 GiB or more) and at the end
// with the time taken and the rate: "prefault: 50% (1.16 of 2.31 GiB, 0.8 s)", "prefault: 100%
// (2.31 GiB in 1.6 s, 1.44 GiB/s)". Safe to call from several threads.
ProgressFn stderr_progress(std::string prefix = "", int every_percent = 25);

// Bringing a mapped file's weights into memory ahead of use (EngineOptions::prefault). Without
// it a fresh process's first tokens wait for a page fault, or a disk read, on every newly routed
// expert.
enum class Prefault {
  Off,         // pages come in as the forward pass first touches them
  Background,  // after the model is ready, a low-priority thread faults them in, in order of use
  Wait,        // the same walk, before Engine::load returns
};

struct EngineOptions {
  int n_threads = 0;   // 0: all cores
  int n_ctx = 0;       // tokens per session; 0: the model's trained context, capped at 131072
  int max_batch = 256; // tokens per internal forward pass (prefill chunk)
  CacheType cache_type_k = CacheType::F16;  // as llama.cpp's default
  CacheType cache_type_v = CacheType::F16;
  // How the weights come into memory (docs/loading.md). mmap false (--no-mmap): the file is read
  // into anonymous memory (huge pages where the kernel has them) and its page cache released
  // behind the read. mlock (--mlock): the weights are locked in memory at load; a refusal
  // (RLIMIT_MEMLOCK) is a warning in ModelInfo::warnings. The pre-fault runs only where it has
  // something to do: the CPU computing from a mapped file that is not locked.
  bool mmap = true;
  bool mlock = false;
  Prefault prefault = Prefault::Background;
  // On the CPU backend with mmap false, the Q4_0, Q4_K, IQ4_XS and Q5_K matrices are rewritten in
  // place at load in the AVX-512 kernels' layouts (same bits out, faster products;
  // docs/loading.md). false (--no-repack): the file's layout. A mapped file is never rewritten.
  bool repack = true;
  // Progress of "read" (mmap false), "repack" and "lock" (mlock) on the loading thread, and of
  // "prefault" on the pre-fault's own thread (keep it short: it must not block).
  ProgressFn on_progress;
  std::string routing_trace;  // debugging: write every MoE routing decision to this file
  int state_snapshots = 4;    // recurrent-state snapshots kept per session for prefix reuse
  // Where the model runs (--device): "auto" (the first GPU if there is one, else the CPU), "cpu",
  // "vulkan" or "vulkan:N"; n_gpu_layers as llama.cpp's -ngl (-1: all, 0: the CPU).
  std::string device = "cpu";
  int n_gpu_layers = -1;
  // Experts in system RAM on a GPU (llama.cpp's flags; docs/placement.md): --cpu-moe, --n-cpu-moe N,
  // -ot REGEX=cpu|vulkan (blk.N.ffn_up_exps.E: one expert), --vram-budget SIZE ("16G": the planner picks the experts). n_seq: the
  // sessions whose caches the device must hold too (server slots).
  bool cpu_moe = false;
  int n_cpu_moe = 0;
  std::vector<std::string> override_tensor;
  std::string vram_budget;
  // --stream-experts N: an expert in RAM that N or more rows of a pass are routed to is uploaded
  // and computed on the GPU instead of the CPU (0: never; -1: the backend's default).
  int stream_experts = -1;
  int n_seq = 1;
};

struct SamplingOptions {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  uint64_t seed = 0;
  // OpenAI logit_bias: (token id, bias) pairs added to the raw logits before sampling, in every
  // mode; ids must be in [0, n_vocab), biases finite.
  std::vector<std::pair<int32_t, float>> logit_bias;
};

enum class FinishReason { None, Stop, Length };

// How tokens are produced (CLOVER-SPEC section 2).
enum class DecodeMode {
  AR,         // one token per forward pass
  Diffusion,  // block diffusion: fill every position of a block that reaches the threshold, per pass
  Spec,       // guess-then-verify: draft a block by denoising, keep the prefix the causal pass agrees with
};

// A block of a diffusion or spec step, after a denoising pass (for drawing it as it fills in); in
// spec mode also after the verify pass (accepted >= 0). Position 0 is the block's pending token,
// decided before the block (by the previous block's commit pass or the prompt).
struct BlockEvent {
  std::vector<int32_t> tokens;  // block positions; undecided ones hold the mask token
  std::vector<bool> decided;
  int pass = 0;                 // 1 for the first denoising pass of the block
  std::vector<float> confidence;  // probability of each decided token when it was chosen; 0: not known
  int block = 0;                // 0 for the generation's first block
  int accepted = -1;            // spec: -1 after drafting; after verifying, drafts 1..accepted were kept
};

struct GenerateOptions {
  int max_tokens = 128;
  SamplingOptions sampling;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;
  DecodeMode mode = DecodeMode::AR;
  float threshold = -1.0f;  // diffusion confidence threshold; < 0: the model's (0.95)
  int block_size = 0;       // positions per block; 0: the model's (32)
  std::function<void(const BlockEvent&)> on_block;  // optional: every denoising pass
  // Prompt positions after which the session keeps a recurrent-state snapshot, besides the end of
  // the prompt: where later prompts are likely to diverge (a chat: the end of the conversation,
  // before the generation prompt, which the next turn re-renders differently).
  std::vector<int> snapshot_at;
  // OpenAI logprobs: < 0 off; k >= 0 (at most 20): every event carries, for each of its tokens,
  // the token's log-probability and the k most likely tokens under the raw model distribution
  // (temperature 1, no penalties, bias or filters) of the row it was chosen from: a causal row
  // (AR, pending tokens, spec's verified drafts) or the denoising row that decided it (diffusion).
  int logprobs = -1;
};

struct GenerateStats {
  int prompt_tokens = 0;       // tokens evaluated for the prompt (excluding a reused prefix)
  int cached_tokens = 0;       // prompt tokens reused from the session's cache
  int generated_tokens = 0;
  double prompt_seconds = 0, generate_seconds = 0;
  int passes = 0;              // forward passes after the prompt
  int denoise_passes = 0;      // of which denoising passes (diffusion, spec drafts)
  int blocks = 0;              // blocks completed (diffusion, spec cycles)
  double denoise_seconds = 0;  // time in denoising passes
};

// The work of a session's last forward pass (eval or denoise), for benchmarks: how many tokens it
// ran and how much of the MoE it touched. Summed over every layer (divide by ModelInfo::n_layer
// for a per-layer figure) and over every chunk of a long eval.
struct PassStats {
  int64_t tokens = 0;
  int64_t expert_rows = 0;       // (token, routed expert) pairs computed
  int64_t distinct_experts = 0;  // distinct routed experts whose weights were read
};

struct TopToken {
  int32_t token;
  double logprob;
};

// One generated token's log-probability and the most likely alternatives at its position
// (GenerateOptions::logprobs), best first.
struct TokenLogprobs {
  int32_t token;
  double logprob;
  std::vector<TopToken> top;
};

// What a generation reports as it goes.
struct Event {
  std::string text;                   // new text (whole UTF-8 characters)
  std::vector<int32_t> tokens;        // tokens committed with this event
  FinishReason finish = FinishReason::None;  // set on the last event
  GenerateStats stats;                // filled on the last event
  std::vector<TokenLogprobs> logprobs;  // one per token of `tokens` when GenerateOptions::logprobs >= 0
};
// Return false to stop generating (e.g. the client went away).
using EventFn = std::function<bool(const Event&)>;

class Engine;

// Where the pre-fault of the weights stands (EngineOptions::prefault, Engine::prefault_status).
struct PrefaultStatus {
  enum class State { Off, Running, Done, Stopped };
  State state = State::Off;  // Off: not run (turned off, or nothing to do: see EngineOptions)
  uint64_t done_bytes = 0, total_bytes = 0;
  double seconds = 0;        // since it started; once it has ended, how long it took
};
std::string_view prefault_state_name(PrefaultStatus::State s);  // "off", "running", "done", "stopped"

// Continuous batching counters (Engine::batching_stats).
struct BatchingStats {
  uint64_t passes = 0;     // forward passes run for generations
  uint64_t sequences = 0;  // sequence passes in them (sequences / passes: the mean batch)
  int max_sequences = 0;   // the most sequences one pass held
};

// One sequence with its cache (attention KV + recurrent state). A session serves one conversation
// at a time and is not safe to drive from two threads; different sessions of one engine may be
// driven from different threads at once: their forward passes are then batched together
// (continuous batching), each sequence getting exactly the logits it would get alone.
//
// Prefix reuse: the attention cache can be cut back to any length, the recurrent (GDN) state
// cannot, so a session keeps a few snapshots of its recurrent state (at the end of each prompt).
// A prompt that extends the session's history reuses all of it; one that diverges from it reuses
// the longest prefix ending at a snapshot.
class Session {
 public:
  virtual ~Session() = default;
  virtual int n_past() const = 0;
  virtual int n_ctx() const = 0;
  virtual void reset() = 0;
  // Appends tokens to the sequence; returns logits for the last position, or for every
  // appended position when all_positions (row-major [position][n_vocab]).
  virtual std::vector<float> eval(std::span<const int32_t> tokens, bool all_positions) = 0;
  // One denoising pass over a block (the pending token, then tokens or the mask token) after the
  // committed tokens; returns logits for every block position, or with `rows` (ascending block
  // positions) one row per requested position, in that order (a pass costs less the fewer rows it
  // computes: output i predicts position i+1, so only outputs before masked positions matter). The
  // session is left unchanged.
  virtual std::vector<float> denoise(std::span<const int32_t> block, bool reverse_path = true,
                                     std::span<const int32_t> rows = {}) = 0;
  // The same passes reading back what the decoders read (selection on the backend): each row's k
  // best tokens (k <= 64, best first, ties to the lower id) with their log-probabilities at
  // temperature 1, instead of its logits. eval_top: the last position; denoise_top: one list per
  // requested row (all rows when `rows` is empty). For benchmarks, which time what decoding costs.
  virtual std::vector<TopToken> eval_top(std::span<const int32_t> tokens, int k) = 0;
  virtual std::vector<std::vector<TopToken>> denoise_top(std::span<const int32_t> block, std::span<const int32_t> rows, int k,
                                                         bool reverse_path = true) = 0;
  // The work of the last eval() or denoise() of this session (generate() runs many passes: this is
  // then its last one).
  virtual PassStats last_pass() const = 0;
  // How many of the prompt's tokens generate() would reuse from the cache (0: none).
  virtual int reusable_prefix(std::span<const int32_t> prompt) const = 0;
  // Generates after `prompt` (the tokens already in the session that match the prompt's start
  // are reused). Streams events; returns the final one.
  virtual Event generate(std::span<const int32_t> prompt, const GenerateOptions& opts, const EventFn& on_event) = 0;
};

class Engine {
 public:
  static std::unique_ptr<Engine> load(const std::string& path, const EngineOptions& opts = {});
  virtual ~Engine() = default;

  virtual const ModelInfo& info() const = 0;
  virtual int n_threads() const = 0;
  virtual std::unique_ptr<Session> new_session() = 0;
  virtual BatchingStats batching_stats() const = 0;
  virtual PrefaultStatus prefault_status() const = 0;

  virtual std::vector<int32_t> tokenize(std::string_view text, bool parse_special) const = 0;
  virtual std::string detokenize(std::span<const int32_t> tokens) const = 0;
  virtual std::string token_text(int32_t token) const = 0;
  // The texts tokenize() reads as one token only with parse_special (control tokens such as
  // "<|im_end|>"): chat front ends keep them as text where a request wrote them.
  virtual std::vector<std::string> control_texts() const = 0;
  virtual bool is_end_token(int32_t token) const = 0;
  virtual const std::string& chat_template() const = 0;
};

}  // namespace clover
