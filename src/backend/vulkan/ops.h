// Host side of the shaders: one function per op that checks its arguments and records its
// dispatches into a CommandList. Each names the shader (shaders/<name>.comp) and the CPU twin
// the op tests compare it with. Shapes: rows of floats, row-major, strides in floats.
#pragma once
#include <cstdint>

#include "sampling/row_top.h"

#include "backend/vulkan/commands.h"
#include "kernels/dtype.h"
#include "kernels/matmul.h"

namespace clover::vulkan {

// A 32-bit value a shader reads when it runs, not when it is recorded: word `index` of `words` (a
// pass's n_past, in the executor's pass-parameters buffer). A recorded list stays valid while the
// value changes between its submissions; the host writes the word before each one.
struct DeviceWord {
  BufferRange words;
  uint32_t index = 0;
};

// A weight matrix on the device: `rows` rows of `cols` values of `type` (F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS: stored as in the file), row o at
// byte offset + o * row_stride of `buffer`.
struct DeviceMatrix {
  DType type = DType::F32;
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  int64_t rows = 0, cols = 0;
  uint64_t row_stride = 0;
};

// Whether matmul.comp reads weights of this type against Q8_0 activations (record_quantize_q8_0
// first) rather than floats: every block type does.
inline bool reads_q8_activations(DType t) { return t != DType::F32 && t != DType::F16 && t != DType::BF16; }
// Which quantised activations a block type's products read, as on the CPU: Q8_K (one scale per
// 256 values) for the K-quants and IQ4_XS (kernels/kquant.h), Q8_1 (Q8_0 plus the fp16 of d x the
// sum of the quants, the offset term) for Q4_1 / Q5_1 (kernels/legacy_quant.h), Q8_0 otherwise.
enum class Q8Kind : uint32_t { Q8_0 = 0, Q8_1 = 1, Q8_K = 2 };
inline Q8Kind activation_kind(DType t) {
  if (dtype_is_kquant(t)) return Q8Kind::Q8_K;
  if (t == DType::Q4_1 || t == DType::Q5_1) return Q8Kind::Q8_1;
  return Q8Kind::Q8_0;
}
inline const char* q8_kind_name(Q8Kind k) { return k == Q8Kind::Q8_K ? "Q8_K" : k == Q8Kind::Q8_1 ? "Q8_1" : "Q8_0"; }

// Bytes a host matrix takes on the device (as stored in the file).
uint64_t device_matrix_bytes(const kernels::MatRef& m);
// Copies a host matrix into `dst` at `offset`, as stored (BF16 included: the shader widens it
// with a shift, so no device bf16 support is needed), and describes it.
DeviceMatrix upload_matrix(Device& dev, const kernels::MatRef& m, const Buffer& dst, uint64_t offset);

// Scratch for activations quantised to Q8_0: quants [rows][cols / 32][8] words, scales [rows][cols / 32].
// Q8_K: the same layout, each super-block's d repeated for its 8 blocks of 32. Q8_1: scales are
// [rows][cols / 32][2] (d, s).
struct Q8Activations {
  Buffer quants, scales;
  int64_t rows = 0, cols = 0;
  Q8Kind kind = Q8Kind::Q8_0;
};
Q8Activations make_q8_activations(Device& dev, int64_t rows, int64_t cols, Q8Kind kind = Q8Kind::Q8_0);

// quantize_q8_0_activation.comp (twin: kernels::quantize_row_q8_0_activation, and with a Q8_1
// scratch kernels::quantize_row_q8_1_activation): rows of x -> a.
void record_quantize_q8_0(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t cols, int64_t x_stride,
                          const Q8Activations& a);
// quantize_q8_k_activation.comp (twin: kernels::quantize_row_q8_k_activation): rows of x -> a
// (a Q8_K scratch; cols a multiple of 256).
void record_quantize_q8_k(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t cols, int64_t x_stride,
                          const Q8Activations& a);
// Quantises x into a, in a's kind.
void record_quantize(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t cols, int64_t x_stride,
                     const Q8Activations& a);

// matmul.comp (twin: kernels::matmul_ref): y[r * y_stride + o] = W row o . x row r for every
// output row o and the n_act activation rows. Float weights read x (x_stride floats apart);
// block-quantised weights read q8 (of activation_kind(w.type), quantised from x beforehand by record_quantize_q8_0). W is split
// into chunks of rows that fit one binding and one dispatch grid.
void record_matmul(CommandList& cl, Device& dev, const DeviceMatrix& w, BufferRange x, int64_t x_stride,
                   const Q8Activations* q8, int64_t n_act, BufferRange y, int64_t y_stride);
// The dispatches record_matmul records for `w` (its chunks of rows).
int64_t matmul_dispatches(const Device& dev, const DeviceMatrix& w);

// rms_norm.comp (twin: model::ops::rms_norm, l2_norm, and the GDN gated norm). Rows are heads of
// tokens: row (t, h) of x at t * x_row + h * x_head (y and z at t * y_row + h * y_head).
enum class NormMode : uint32_t { Weighted = 0, Scaled = 1, Gated = 2 };
struct NormShape {
  int64_t n = 0, tokens = 0, heads = 1;
  int64_t x_row = 0, x_head = 0, y_row = 0, y_head = 0;
};
void record_rms_norm(CommandList& cl, Device& dev, const NormShape& s, NormMode mode, float eps, float post, BufferRange x,
                     BufferRange w, BufferRange z, BufferRange y);
// record_rms_norm, then y quantised into a (record_quantize over rows of heads x n): one dispatch
// where norm_quantizes(n, a) and the heads of a row lie side by side in y (y_head == n; rms_norm.comp
// QUANT, bitwise the two), else the two; Q8_K also where heads of n < 256 fill super-blocks in
// groups (256 / n heads a workgroup: the GDN's heads of 128). a holds s.tokens rows of s.heads x s.n.
void record_rms_norm_quantize(CommandList& cl, Device& dev, const NormShape& s, NormMode mode, float eps, float post,
                              BufferRange x, BufferRange w, BufferRange z, BufferRange y, const Q8Activations& a);
// rms_norm.comp ADD (twin: record_elementwise Add, then record_rms_norm Weighted): the residual
// add and the norm after it in one dispatch, x += r (r at x's strides), y = rms_norm(x) * w;
// bitwise the two dispatches. One head a row.
void record_add_rms_norm(CommandList& cl, Device& dev, const NormShape& s, float eps, BufferRange x, BufferRange r,
                         BufferRange w, BufferRange y);
// The widest row rms_norm.comp QUANT quantises as it norms (it holds the row in shared memory).
constexpr int64_t kNormQuantizeMaxCols = 4096;
// Whether a norm of rows of n can quantise its output into a in the same dispatch: n up to
// kNormQuantizeMaxCols, a multiple of 32 (Q8_0, Q8_1 blocks) or of 256 (Q8_K super-blocks).
bool norm_quantizes(int64_t n, const Q8Activations& a);
// record_add_rms_norm, then y quantised into a (record_quantize) when a is given: one dispatch
// where norm_quantizes (rms_norm.comp ADD QUANT, bitwise the two), else the two. y's rows are
// s.y_row apart; a holds s.tokens rows of s.n.
void record_add_rms_norm_quantize(CommandList& cl, Device& dev, const NormShape& s, float eps, BufferRange x, BufferRange r,
                                  BufferRange w, BufferRange y, const Q8Activations* a);

// rope_neox.comp (twin: model::ops::rope_neox), in place on x; table from rope_table.h.
struct RopeShape {
  int64_t tokens = 0, heads = 0, n_rot = 0, row_stride = 0, head_stride = 0;
};
void record_rope_neox(CommandList& cl, Device& dev, const RopeShape& s, BufferRange x, BufferRange table);
// record_rms_norm Weighted over heads, then record_rope_neox on its output (tokens and heads of
// s, rows y_row and heads y_head apart): one dispatch (rms_norm.comp ROPE, bitwise the two) where
// the head fits the shader's row (n <= kNormQuantizeMaxCols), else the two.
void record_rms_norm_rope(CommandList& cl, Device& dev, const NormShape& s, float eps, BufferRange x, BufferRange w,
                          BufferRange y, int64_t n_rot, BufferRange table);

// argmax.comp (twin: the greedy sampler's rule): best[2 r] = index, best[2 r + 1] = value bits.
void record_argmax(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t n, int64_t stride, BufferRange best);

// select_top.comp (twin: sampling::select_top_ref, backend/row_top.h): per row of logits the first
// maximum, the sum of exp(x - max) over the other entries, and the k best entries, in
// select_top_words(k) words a row; read_row_top turns one row of it into a RowTop.
uint64_t select_top_words(int k);
void record_select_top(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t n, int64_t stride, int k,
                       BufferRange out);
void read_row_top(const uint32_t* words, int k, sampling::RowTop& out);

// moe_router.comp (twin: the routing in model/moe.cpp): ids and weights [tokens][k].
void record_moe_router(CommandList& cl, Device& dev, BufferRange logits, int64_t tokens, int64_t n_expert, int64_t k,
                       int64_t stride, BufferRange ids, BufferRange weights);

// attention.comp (twin: kernels::attention_ref): every query head of `tokens` tokens against one
// layer's KV cache; causal rows see n_past + t + 1 keys, a denoising block's rows n_past + tokens,
// n_past read from `n_past` when the list runs (the caller keeps it inside the cache).
struct KvCacheView {
  DType type = DType::F16;  // F32, F16 or Q8_0
  BufferRange range;
  uint64_t stride = 0;      // bytes between positions
  uint64_t head_bytes = 0;  // bytes between KV heads inside a position
};
struct AttentionShape {
  int64_t head_dim = 0, n_head = 0, n_head_kv = 0, tokens = 0;
  bool causal = true;
  int64_t q_row = 0, q_head = 0, o_row = 0;  // floats between tokens / heads of q, tokens of o
};
// Split-K (flash-decoding) for caches longer than one chunk: with `split`, the keys go in chunks
// of attention_split_chunk(n_ctx) absolute positions (at least kAttentionMinChunk, at most
// kAttentionMaxSplits chunks for the cache's n_ctx positions), one workgroup per (token, head,
// chunk) (attention.comp SPLIT), merged in chunk order (attention_combine.comp), the query tokens
// in groups of kAttentionSplitTokens sharing `partials` (attention_split_floats floats). The chunks
// depend on the position and n_ctx only, so every pass gives a token the same arithmetic (batch
// invariance, guess-then-verify == AR); a token whose keys all lie in the first chunk gets bitwise
// the single-pass result. Without `split`, or when n_ctx fits one chunk: the single pass.
constexpr int64_t kAttentionMinChunk = 256;
constexpr int64_t kAttentionMaxSplits = 64;
constexpr int64_t kAttentionSplitTokens = 64;
struct AttentionSplit {
  BufferRange partials;
  int64_t n_ctx = 0;  // the cache's positions
};
int64_t attention_split_chunk(int64_t n_ctx);
int64_t attention_split_floats(int64_t n_head, int64_t head_dim);
void record_attention(CommandList& cl, Device& dev, const AttentionShape& s, float scale, BufferRange q,
                      const KvCacheView& k, const KvCacheView& v, BufferRange o, DeviceWord n_past,
                      const AttentionSplit* split = nullptr);

// conv_silu.comp (twin: kernels::conv_silu_ref over a run of tokens, as model/gdn.cpp runs it; w is
// the file's [C][K], which the twin takes tap-major: kernels::conv_taps_major):
// y = silu(causal depthwise conv of x), the state [K-1][C] advanced in place.
void record_conv_silu(CommandList& cl, Device& dev, int64_t channels, int kernel, int64_t tokens, BufferRange x,
                      int64_t x_stride, BufferRange state, BufferRange w, BufferRange y, int64_t y_stride);
// record_conv_silu, then the L2 norm of the first norm_heads heads of d channels of every output
// row (record_rms_norm Scaled with eps / d and post 1 / sqrt(d), as the GDN layer norms its q and
// k heads): one dispatch (conv_silu.comp L2, bitwise the two) where channels is a multiple of d,
// d <= 256 and the run is short enough for one invocation's loops (lavapipe ends an invocation's
// loops after 65,535 iterations in all: up to several hundred tokens), else the two.
void record_conv_silu_l2(CommandList& cl, Device& dev, int64_t channels, int kernel, int64_t tokens, BufferRange x,
                         int64_t x_stride, BufferRange state, BufferRange w, BufferRange y, int64_t y_stride, int64_t d,
                         int64_t norm_heads, float eps);

// gdn_step.comp (twin: kernels::gdn_step_ref with the gates of model/gdn.cpp): the delta rule
// over `tokens` tokens for every value head, state [Hv][d][d] advanced in place. params holds
// dt_bias [Hv] then a [Hv].
struct GdnShape {
  int64_t d = 0, n_k_heads = 0, n_v_heads = 0, tokens = 0;
  int64_t conv_stride = 0, gate_stride = 0, o_stride = 0;
};
void record_gdn_step(CommandList& cl, Device& dev, const GdnShape& s, float scale, BufferRange conv, BufferRange alpha,
                     BufferRange beta, BufferRange params, BufferRange state, BufferRange o);
// gdn_scan.comp (twins: gdn_step.comp, kernels::gdn_step_ref): the same delta rule over `tokens`
// tokens in chunks of kGdnScanChunk (the chunkwise form for prefill: products inside a chunk, the
// state carried between chunks). Agrees with the step to rounding (NMSE ~1e-13), not bitwise.
constexpr int64_t kGdnScanChunk = 64;  // tokens per chunk (L in the shader)
constexpr int64_t kGdnScanRows = 32;   // value rows of a head per workgroup (VB in the shader)
void record_gdn_scan(CommandList& cl, Device& dev, const GdnShape& s, float scale, BufferRange conv, BufferRange alpha,
                     BufferRange beta, BufferRange params, BufferRange state, BufferRange o);

// The delta rule of a causal pass of `tokens` tokens at positions n_past..: the whole chunks of
// kGdnScanChunk positions aligned to absolute positions (multiples of 64) that lie inside the
// pass run on gdn_scan, the tokens before the first and after the last on gdn_step. A token's
// arithmetic thus depends on its position and on which aligned chunks the pass covers whole, not
// on where the pass starts or ends otherwise: a pass of fewer than 64 tokens (a decode step, a
// verify or commit pass of a block under 64) is bitwise the step shader, and a long pass cut at
// multiples of 64 gives bitwise what it gives uncut (docs/vulkan.md, "The chunked GDN scan").
struct GdnRuns {
  int64_t lead = 0, scan = 0, tail = 0;  // step, scan, step; they sum to the pass's tokens
};
GdnRuns gdn_causal_runs(int64_t n_past, int64_t tokens);
void record_gdn_causal(CommandList& cl, Device& dev, const GdnShape& s, int64_t n_past, float scale, BufferRange conv,
                       BufferRange alpha, BufferRange beta, BufferRange params, BufferRange state, BufferRange o);

// gdn_step.comp REVERSE (twin: kernels::gdn_step_reverse_ref as backend/cpu/gdn.cpp drives it): the
// reverse in-block path of a denoising pass (CLOVER-SPEC 3.3) over the block's tokens, last to
// first, ADDED to o. alpha, beta and params (rev dt_bias [Hv] then rev a [Hv]) are the ssm_rev_*
// gates; `scratch` holds R [Hv][d][d], zeroed by the shader.
void record_gdn_reverse(CommandList& cl, Device& dev, const GdnShape& s, float scale, BufferRange conv, BufferRange alpha,
                        BufferRange beta, BufferRange params, BufferRange scratch, BufferRange o);

// kv_store.comp (twin: store_kv_row in backend/cpu/attention.cpp): the K or V rows of `tokens`
// tokens (`values` floats each, x_stride apart) into the cache at positions n_past.., in the
// cache's type (F32, F16 or Q8_0), rows of row_bytes back to back. n_past is read from `n_past`
// when the list runs; rows past the cache's end are not written (the caller checks the context).
void record_kv_store(CommandList& cl, Device& dev, BufferRange x, int64_t tokens, int64_t values, int64_t x_stride,
                     DType type, const Buffer& cache, uint64_t row_bytes, DeviceWord n_past);

// elementwise.comp: y (rows x n, y_row apart) op= x, x read through the strided view
// r * x_row + (c / seg) * x_seg + x_off + c % seg (seg = n, x_seg = 0, x_off = 0: a plain row).
enum class Elementwise : uint32_t { Add = 0, MulSigmoid = 1, Copy = 2 };
struct ElementwiseShape {
  int64_t n = 0, rows = 0, y_row = 0, x_row = 0;
  int64_t seg = 0, x_seg = 0, x_off = 0;  // seg 0: n
};
void record_elementwise(CommandList& cl, Device& dev, Elementwise op, const ElementwiseShape& s, BufferRange x,
                        BufferRange y);
// The attention output gate, y *= sigmoid(x) (record_elementwise MulSigmoid, shape s), then y's
// rows quantised into a (record_quantize; a holds s.rows rows of s.n): one dispatch, bitwise the
// two (quantize_q8_0_activation.comp GATE for Q8_0 and Q8_1, quantize_q8_k_activation.comp GATE
// for Q8_K, s.n a multiple of 256).
void record_sigmoid_gate_quantize(CommandList& cl, Device& dev, const ElementwiseShape& s, BufferRange x, BufferRange y,
                                  const Q8Activations& a);

}  // namespace clover::vulkan
