// Argument checks and dispatch recording of every shader (ops.h).
#include "backend/vulkan/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/vulkan/ops_internal.h"
#include "kernels/convert.h"
#include "kernels/repack.h"

namespace clover::vulkan {

namespace {

using detail::groups;
using detail::QuantizePush;
using detail::kMaxGroups;
using detail::MatmulPush;
using detail::NormPush;
using detail::u32;

struct RopePush {
  uint32_t tokens, heads, n_rot, row_stride, head_stride;
};
struct ArgmaxPush {
  uint32_t n, stride;
};
struct SelectTopPush {
  uint32_t n, stride, k;
};
struct RouterPush {
  uint32_t n_expert, k, stride;
};
struct AttentionPush {
  uint32_t head_dim, n_head, group, q_row, q_head, o_row;
  uint32_t k_stride, k_head_bytes, k_type, v_stride, v_head_bytes, v_type;
  uint32_t n_past_at, n_tokens, causal;
  float scale;
  uint32_t t0, chunk, n_split;
};
struct AttentionCombinePush {
  uint32_t head_dim, n_head, n_split, o_row, t0;
};
struct ConvPush {
  uint32_t channels, kernel, tokens, x_stride, y_stride;
};
struct GdnPush {
  uint32_t d, n_k_heads, n_v_heads, tokens, conv_stride, gate_stride, o_stride;
  float scale;
  uint32_t first;
};

struct KvStorePush {
  uint32_t row_bytes, values, n_past_at, tokens, x_stride, type;
};
struct ElementwisePush {
  uint32_t n, rows, y_row, x_row, seg, x_seg, x_off, mode;
};


void check_word(const DeviceWord& w, const char* op) {
  if (!w.words.buffer || !*w.words.buffer) throw VulkanError(fmt::format("{}: no buffer holds n_past", op));
  const uint64_t bytes = w.words.size();
  if ((static_cast<uint64_t>(w.index) + 1) * 4 > bytes)
    throw VulkanError(fmt::format("{}: n_past at word {} of a binding of {} bytes", op, w.index, bytes));
}

uint32_t kv_type_id(DType t) {
  if (t != DType::F32 && t != DType::F16 && t != DType::Q8_0)
    throw VulkanError(fmt::format("attention: a {} KV cache is not supported (f32, f16, q8_0)", dtype_name(t)));
  return static_cast<uint32_t>(t);
}

}  // namespace

uint64_t device_matrix_bytes(const kernels::MatRef& m) { return static_cast<uint64_t>(m.rows) * dtype_row_bytes(m.type, m.cols); }

DeviceMatrix upload_matrix(Device& dev, const kernels::MatRef& m, const Buffer& dst, uint64_t offset) {
  DeviceMatrix d;
  d.type = m.type;
  d.buffer = &dst;
  d.offset = offset;
  d.rows = m.rows;
  d.cols = m.cols;
  d.row_stride = dtype_row_bytes(d.type, m.cols);
  if (m.cols % dtype_block_size(m.type))
    throw VulkanError(fmt::format("upload: {} columns are not whole {} blocks", m.cols, dtype_name(m.type)));
  if (offset % 4) throw VulkanError(fmt::format("upload: matrix offset {} is not a multiple of 4", offset));
  if (offset + device_matrix_bytes(m) > dst.size())
    throw VulkanError(fmt::format("upload: a {} x {} {} matrix at {} does not fit a buffer of {} bytes", m.rows, m.cols,
                                  dtype_name(m.type), offset, dst.size()));
  // Rows packed back to back (a file's rows may be further apart: a view into a fused tensor); a
  // chunk of rows at a time. Chunks hold a multiple of 4 rows, so every chunk but the last starts
  // and ends on a word.
  const int64_t rows_per_chunk = std::max<int64_t>(4, (4 << 20) / static_cast<int64_t>(d.row_stride) / 4 * 4);
  std::vector<uint8_t> buf;
  for (int64_t r0 = 0; r0 < m.rows; r0 += rows_per_chunk) {
    const int64_t n = std::min(rows_per_chunk, m.rows - r0);
    buf.assign(static_cast<size_t>(n) * d.row_stride + 4, 0);
    kernels::unpack_rows(m, r0, n, buf.data());  // (the file's row-major blocks, from a CPU-repacked matrix too)
    // Copies move whole words: the last chunk may end inside a word and then writes the zero
    // padding after the matrix (up to 3 bytes; the buffer must have them: sizes round up to 4).
    const uint64_t at = offset + static_cast<uint64_t>(r0) * d.row_stride;
    const uint64_t bytes = static_cast<uint64_t>(n) * d.row_stride;
    dev.upload(dst, at, buf.data(), (bytes + 3) & ~uint64_t{3});
  }
  return d;
}

Q8Activations make_q8_activations(Device& dev, int64_t rows, int64_t cols, Q8Kind kind) {
  if (cols % 32) throw VulkanError(fmt::format("Q8_0 activations: {} columns are not whole blocks of 32", cols));
  if (kind == Q8Kind::Q8_K && cols % 256)
    throw VulkanError(fmt::format("Q8_K activations: {} columns are not whole super-blocks of 256", cols));
  Q8Activations a;
  a.rows = rows;
  a.cols = cols;
  a.kind = kind;
  a.quants = dev.create_buffer(static_cast<uint64_t>(rows) * cols, MemoryPurpose::Scratch);
  a.scales = dev.create_buffer(static_cast<uint64_t>(rows) * (cols / 32) * (kind == Q8Kind::Q8_1 ? 8 : 4),
                               MemoryPurpose::Scratch);
  return a;
}

void record_quantize_q8_0(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t cols, int64_t x_stride,
                          const Q8Activations& a) {
  if (cols % 32 || cols != a.cols || rows > a.rows || a.kind == Q8Kind::Q8_K)
    throw VulkanError(fmt::format("quantize_q8_0: {} x {} rows into {} scratch of {} x {}", rows, cols,
                                  q8_kind_name(a.kind), a.rows, a.cols));
  const Pipeline& p = dev.pipelines().get(
      a.kind == Q8Kind::Q8_1 ? "quantize_q8_1_activation" : "quantize_q8_0_activation", 3, sizeof(QuantizePush));
  const QuantizePush push{u32(cols, "cols"), u32(rows, "rows"), u32(x_stride, "x_stride")};
  cl.dispatch(p, {x, whole(a.quants), whole(a.scales)}, push, groups(rows * (cols / 32), 64, "quantize_q8_0"));
}

void record_quantize_q8_k(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t cols, int64_t x_stride,
                          const Q8Activations& a) {
  if (cols % 256 || cols != a.cols || rows > a.rows || a.kind != Q8Kind::Q8_K)
    throw VulkanError(fmt::format("quantize_q8_k: {} x {} rows into {} scratch of {} x {}", rows, cols,
                                  q8_kind_name(a.kind), a.rows, a.cols));
  const Pipeline& p = dev.pipelines().get("quantize_q8_k_activation", 3, sizeof(QuantizePush));
  const QuantizePush push{u32(cols, "cols"), u32(rows, "rows"), u32(x_stride, "x_stride")};
  cl.dispatch(p, {x, whole(a.quants), whole(a.scales)}, push, groups(cols / 256, 1, "quantize_q8_k (super-blocks)"),
              groups(rows, 1, "quantize_q8_k (rows)"));
}

void record_quantize(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t cols, int64_t x_stride,
                     const Q8Activations& a) {
  if (a.kind == Q8Kind::Q8_K)
    record_quantize_q8_k(cl, dev, x, rows, cols, x_stride, a);
  else
    record_quantize_q8_0(cl, dev, x, rows, cols, x_stride, a);
}

int64_t matmul_dispatches(const Device& dev, const DeviceMatrix& w) {
  const int64_t chunk = detail::units_per_dispatch(dev, w.row_stride, "matmul (weight rows)");
  return (w.rows + chunk - 1) / chunk;
}

void record_matmul(CommandList& cl, Device& dev, const DeviceMatrix& w, BufferRange x, int64_t x_stride,
                   const Q8Activations* q8, int64_t n_act, BufferRange y, int64_t y_stride) {
  const bool quant = reads_q8_activations(w.type);
  if (quant && (!q8 || q8->cols != w.cols || q8->rows < n_act || q8->kind != activation_kind(w.type)))
    throw VulkanError(fmt::format("matmul: {} weights of {} columns need {} activations of {} columns for {} rows",
                                  dtype_name(w.type), w.cols, q8_kind_name(activation_kind(w.type)), w.cols, n_act));
  if (!quant && x_stride < w.cols) throw VulkanError("matmul: activation stride shorter than a row");
  if (n_act < 1 || w.rows < 1) throw VulkanError("matmul: empty product");
  const Pipeline& p = dev.pipelines().get(detail::matmul_shader(w.type, false), 4, sizeof(MatmulPush));
  // Rows per chunk: the chunk (plus up to an alignment of lead-in) must fit one binding.
  const int64_t chunk = detail::units_per_dispatch(dev, w.row_stride, "matmul (weight rows)");
  const BufferRange act = quant ? whole(q8->quants) : x;
  const BufferRange scales = quant ? whole(q8->scales) : x;
  const uint32_t lanes = detail::matmul_lanes(w.cols, quant);
  for (int64_t o0 = 0; o0 < w.rows; o0 += chunk) {
    const int64_t rows = std::min(chunk, w.rows - o0);
    const detail::WeightChunk c =
        detail::weight_chunk(dev, *w.buffer, w.offset + static_cast<uint64_t>(o0) * w.row_stride, rows * w.row_stride);
    const MatmulPush push{u32(rows, "rows"),        u32(w.cols, "cols"),     u32(n_act, "n_act"),
                          c.lead,                   u32(w.row_stride, "w_stride"), u32(x_stride, "x_stride"),
                          u32(y_stride, "y_stride"), u32(o0, "o0"), 0, 0, 0, 0, 0, 0, lanes};
    cl.dispatch(p, {c.range, act, scales, y}, push, detail::matmul_row_groups(rows, lanes), groups(n_act, detail::kMatmulActRows, "matmul"));
  }
}

namespace detail {
NormPush norm_push(const NormShape& s, NormMode mode, float eps, float post) {
  return {u32(s.n, "n"),         u32(s.heads, "heads"),   u32(s.x_row, "x_row"), u32(s.x_head, "x_head"),
          u32(s.y_row, "y_row"), u32(s.y_head, "y_head"), eps,                   post,
          static_cast<uint32_t>(mode)};
}

std::string quantize_variant(const char* base, Q8Kind kind) {
  return fmt::format("{}_{}", base, kind == Q8Kind::Q8_K ? "q8_k" : kind == Q8Kind::Q8_1 ? "q8_1" : "q8_0");
}
}  // namespace detail
using detail::norm_push;
using detail::quantize_variant;

void record_rms_norm(CommandList& cl, Device& dev, const NormShape& s, NormMode mode, float eps, float post, BufferRange x,
                     BufferRange w, BufferRange z, BufferRange y) {
  if (s.n < 1 || s.tokens < 1 || s.heads < 1) throw VulkanError("rms_norm: empty shape");
  const Pipeline& p = dev.pipelines().get("rms_norm", 4, sizeof(NormPush));
  cl.dispatch(p, {x, w, z, y}, norm_push(s, mode, eps, post), groups(s.tokens * s.heads, 1, "rms_norm"));
}

void record_add_rms_norm(CommandList& cl, Device& dev, const NormShape& s, float eps, BufferRange x, BufferRange r,
                         BufferRange w, BufferRange y) {
  if (s.n < 1 || s.tokens < 1 || s.heads != 1) throw VulkanError("add_rms_norm: empty shape or more than one head a row");
  const Pipeline& p = dev.pipelines().get("rms_norm_add", 4, sizeof(NormPush));
  cl.dispatch(p, {x, w, r, y}, norm_push(s, NormMode::Weighted, eps, 1.0f), groups(s.tokens, 1, "rms_norm_add"));
}

bool norm_quantizes(int64_t n, const Q8Activations& a) {
  return n % (a.kind == Q8Kind::Q8_K ? 256 : 32) == 0 && n <= kNormQuantizeMaxCols;
}

namespace {
// Heads rms_norm.comp QUANT norms to a workgroup: 1, or for Q8_K heads of n < 256 the 256 / n
// that share a super-block (0: not fusable, n not a divisor of 256 or heads not a multiple).
int64_t norm_quantize_rows_per_group(const NormShape& s, const Q8Activations& a) {
  if (a.kind != Q8Kind::Q8_K || s.n >= 256) return norm_quantizes(s.n, a) ? 1 : 0;
  return s.n % 32 == 0 && 256 % s.n == 0 && s.heads % (256 / s.n) == 0 ? 256 / s.n : 0;
}
}  // namespace

void record_rms_norm_quantize(CommandList& cl, Device& dev, const NormShape& s, NormMode mode, float eps, float post,
                              BufferRange x, BufferRange w, BufferRange z, BufferRange y, const Q8Activations& a) {
  const int64_t rows_per_group = norm_quantize_rows_per_group(s, a);
  if (rows_per_group == 0 || (s.heads > 1 && s.y_head != s.n)) {
    record_rms_norm(cl, dev, s, mode, eps, post, x, w, z, y);
    record_quantize(cl, dev, y, s.tokens, s.heads * s.n, s.y_row, a);
    return;
  }
  if (s.tokens < 1 || s.heads < 1 || s.heads * s.n != a.cols || s.tokens > a.rows)
    throw VulkanError(fmt::format("rms_norm_quantize: {} rows of {} x {} into {} scratch of {} x {}", s.tokens, s.heads, s.n,
                                  q8_kind_name(a.kind), a.rows, a.cols));
  const Pipeline& p = dev.pipelines().get(quantize_variant("rms_norm", a.kind), 6, sizeof(NormPush));
  cl.dispatch(p, {x, w, z, y, whole(a.quants), whole(a.scales)}, norm_push(s, mode, eps, post),
              groups(s.tokens * s.heads / rows_per_group, 1, "rms_norm_quantize"));
}

void record_add_rms_norm_quantize(CommandList& cl, Device& dev, const NormShape& s, float eps, BufferRange x, BufferRange r,
                                  BufferRange w, BufferRange y, const Q8Activations* a) {
  if (!a || !norm_quantizes(s.n, *a)) {
    record_add_rms_norm(cl, dev, s, eps, x, r, w, y);
    if (a) record_quantize(cl, dev, y, s.tokens, s.n, s.y_row, *a);
    return;
  }
  if (s.tokens < 1 || s.heads != 1 || s.n != a->cols || s.tokens > a->rows)
    throw VulkanError(fmt::format("add_rms_norm_quantize: {} rows of {} into {} scratch of {} x {}", s.tokens, s.n,
                                  q8_kind_name(a->kind), a->rows, a->cols));
  const Pipeline& p = dev.pipelines().get(quantize_variant("rms_norm_add", a->kind), 6, sizeof(NormPush));
  cl.dispatch(p, {x, w, r, y, whole(a->quants), whole(a->scales)}, norm_push(s, NormMode::Weighted, eps, 1.0f),
              groups(s.tokens, 1, "rms_norm_add_quantize"));
}

void record_rope_neox(CommandList& cl, Device& dev, const RopeShape& s, BufferRange x, BufferRange table) {
  if (s.n_rot < 2 || s.n_rot % 2) throw VulkanError(fmt::format("rope: n_rot {} must be even and positive", s.n_rot));
  const Pipeline& p = dev.pipelines().get("rope_neox", 2, sizeof(RopePush));
  const RopePush push{u32(s.tokens, "tokens"), u32(s.heads, "heads"), u32(s.n_rot, "n_rot"),
                      u32(s.row_stride, "row_stride"), u32(s.head_stride, "head_stride")};
  cl.dispatch(p, {x, table}, push, groups(s.tokens * s.heads * (s.n_rot / 2), 64, "rope"));
}

void record_rms_norm_rope(CommandList& cl, Device& dev, const NormShape& s, float eps, BufferRange x, BufferRange w,
                          BufferRange y, int64_t n_rot, BufferRange table) {
  if (n_rot < 2 || n_rot % 2 || n_rot > s.n)
    throw VulkanError(fmt::format("rms_norm_rope: n_rot {} must be even, positive and at most the head's {}", n_rot, s.n));
  if (s.n > kNormQuantizeMaxCols) {
    record_rms_norm(cl, dev, s, NormMode::Weighted, eps, 1.0f, x, w, w, y);
    record_rope_neox(cl, dev, RopeShape{s.tokens, s.heads, n_rot, s.y_row, s.y_head}, y, table);
    return;
  }
  if (s.n < 1 || s.tokens < 1 || s.heads < 1) throw VulkanError("rms_norm_rope: empty shape");
  struct Push {
    NormPush norm;
    uint32_t n_rot;
  };
  const Pipeline& p = dev.pipelines().get("rms_norm_rope", 5, sizeof(Push));
  cl.dispatch(p, {x, w, w, y, table}, Push{norm_push(s, NormMode::Weighted, eps, 1.0f), u32(n_rot, "n_rot")},
              groups(s.tokens * s.heads, 1, "rms_norm_rope"));
}

void record_argmax(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t n, int64_t stride, BufferRange best) {
  if (n < 1) throw VulkanError("argmax: empty row");
  const Pipeline& p = dev.pipelines().get("argmax", 2, sizeof(ArgmaxPush));
  const ArgmaxPush push{u32(n, "n"), u32(stride, "stride")};
  cl.dispatch(p, {x, best}, push, groups(rows, 1, "argmax"));
}

uint64_t select_top_words(int k) { return 4 + 2 * static_cast<uint64_t>(k); }

void record_select_top(CommandList& cl, Device& dev, BufferRange x, int64_t rows, int64_t n, int64_t stride, int k,
                       BufferRange out) {
  if (n < 1) throw VulkanError("select_top: empty row");
  if (k < 1 || k > sampling::kMaxTop) throw VulkanError(fmt::format("select_top: k {} (1..{})", k, sampling::kMaxTop));
  const Pipeline& p = dev.pipelines().get("select_top", 2, sizeof(SelectTopPush));
  const SelectTopPush push{u32(n, "n"), u32(stride, "stride"), static_cast<uint32_t>(k)};
  cl.dispatch(p, {x, out}, push, groups(rows, 1, "select_top"));
}

void read_row_top(const uint32_t* w, int k, sampling::RowTop& out) {
  auto as_float = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  out.max_logit = as_float(w[0]);
  out.log1p_rest = std::log1p(static_cast<double>(as_float(w[1])));
  out.n = static_cast<int32_t>(std::min<uint32_t>(w[2], static_cast<uint32_t>(k)));
  for (int i = 0; i < out.n; ++i) out.top[i] = {static_cast<int32_t>(w[4 + 2 * i]), as_float(w[5 + 2 * i])};
}

void record_moe_router(CommandList& cl, Device& dev, BufferRange logits, int64_t tokens, int64_t n_expert, int64_t k,
                       int64_t stride, BufferRange ids, BufferRange weights) {
  if (n_expert < 1 || n_expert > 512 || k < 1 || k > 16 || k > n_expert)
    throw VulkanError(fmt::format("moe_router: {} experts, top-{} (the shader takes up to 512 experts, k <= 16)", n_expert, k));
  const Pipeline& p = dev.pipelines().get("moe_router", 3, sizeof(RouterPush));
  const RouterPush push{u32(n_expert, "n_expert"), u32(k, "k"), u32(stride, "stride")};
  cl.dispatch(p, {logits, ids, weights}, push, groups(tokens, 1, "moe_router"));
}

void record_attention(CommandList& cl, Device& dev, const AttentionShape& s, float scale, BufferRange q,
                      const KvCacheView& k, const KvCacheView& v, BufferRange o, DeviceWord n_past,
                      const AttentionSplit* split) {
  if (s.head_dim < 1 || s.head_dim > 256) throw VulkanError(fmt::format("attention: head_dim {} (1..256)", s.head_dim));
  if (s.n_head_kv < 1 || s.n_head % s.n_head_kv)
    throw VulkanError(fmt::format("attention: {} query heads do not group over {} KV heads", s.n_head, s.n_head_kv));
  if ((k.type == DType::Q8_0 || v.type == DType::Q8_0) && s.head_dim % 32)
    throw VulkanError(fmt::format("attention: a q8_0 cache needs head_dim a multiple of 32, not {}", s.head_dim));
  if (s.tokens < 1) throw VulkanError("attention: no query tokens");
  check_word(n_past, "attention");
  AttentionPush push{u32(s.head_dim, "head_dim"), u32(s.n_head, "n_head"), u32(s.n_head / s.n_head_kv, "group"),
                     u32(s.q_row, "q_row"), u32(s.q_head, "q_head"), u32(s.o_row, "o_row"),
                     u32(k.stride, "k stride"), u32(k.head_bytes, "k head"), kv_type_id(k.type),
                     u32(v.stride, "v stride"), u32(v.head_bytes, "v head"), kv_type_id(v.type),
                     n_past.index, u32(s.tokens, "tokens"), s.causal ? 1u : 0u, scale, 0, 0, 0};
  const int64_t chunk = attention_split_chunk(split ? split->n_ctx : 0);
  const int64_t n_split = split ? (split->n_ctx + chunk - 1) / chunk : 1;
  if (n_split <= 1) {
    const Pipeline& p = dev.pipelines().get("attention", 5, sizeof(AttentionPush));
    cl.dispatch(p, {q, k.range, v.range, o, n_past.words}, push, groups(s.tokens * s.n_head, 1, "attention"));
    return;
  }
  const uint64_t need = static_cast<uint64_t>(attention_split_floats(s.n_head, s.head_dim)) * 4;
  const uint64_t have = split->partials.size();
  if (have < need)
    throw VulkanError(fmt::format("attention: split scratch of {} bytes, {} needed", have, need));
  // Groups of kAttentionSplitTokens query tokens share the scratch: split, then merge, per group.
  const Pipeline& ps = dev.pipelines().get("attention_split", 6, sizeof(AttentionPush));
  const Pipeline& pc = dev.pipelines().get("attention_combine", 2, sizeof(AttentionCombinePush));
  push.chunk = u32(chunk, "chunk");
  push.n_split = u32(n_split, "n_split");
  for (int64_t t0 = 0; t0 < s.tokens; t0 += kAttentionSplitTokens) {
    const int64_t n = std::min(kAttentionSplitTokens, s.tokens - t0);
    push.t0 = u32(t0, "t0");
    cl.dispatch(ps, {q, k.range, v.range, o, n_past.words, split->partials}, push, groups(n * s.n_head, 1, "attention"),
                static_cast<uint32_t>(n_split));
    const AttentionCombinePush cpush{u32(s.head_dim, "head_dim"), u32(s.n_head, "n_head"), u32(n_split, "n_split"),
                                     u32(s.o_row, "o_row"), u32(t0, "t0")};
    cl.dispatch(pc, {split->partials, o}, cpush, groups(n * s.n_head, 1, "attention_combine"));
  }
}

int64_t attention_split_chunk(int64_t n_ctx) {
  const int64_t per = (n_ctx + kAttentionMaxSplits - 1) / kAttentionMaxSplits;
  return std::max<int64_t>(kAttentionMinChunk, (per + 63) / 64 * 64);
}

int64_t attention_split_floats(int64_t n_head, int64_t head_dim) {
  return kAttentionSplitTokens * n_head * kAttentionMaxSplits * (head_dim + 2);
}

void record_conv_silu(CommandList& cl, Device& dev, int64_t channels, int kernel, int64_t tokens, BufferRange x,
                      int64_t x_stride, BufferRange state, BufferRange w, BufferRange y, int64_t y_stride) {
  if (kernel < 2 || kernel > 8) throw VulkanError(fmt::format("conv_silu: kernel {} (2..8)", kernel));
  if (channels < 1 || tokens < 1) throw VulkanError("conv_silu: empty shape");
  const Pipeline& p = dev.pipelines().get("conv_silu", 4, sizeof(ConvPush));
  const ConvPush push{u32(channels, "channels"), static_cast<uint32_t>(kernel), u32(tokens, "tokens"),
                      u32(x_stride, "x_stride"), u32(y_stride, "y_stride")};
  cl.dispatch(p, {x, state, w, y}, push, groups(channels, 64, "conv_silu"));
}

void record_conv_silu_l2(CommandList& cl, Device& dev, int64_t channels, int kernel, int64_t tokens, BufferRange x,
                         int64_t x_stride, BufferRange state, BufferRange w, BufferRange y, int64_t y_stride, int64_t d,
                         int64_t norm_heads, float eps) {
  if (d < 1 || norm_heads < 0 || norm_heads * d > channels)
    throw VulkanError(fmt::format("conv_silu_l2: {} heads of {} normed in {} channels", norm_heads, d, channels));
  const float fd = static_cast<float>(d);
  // Loop iterations of one invocation of the fused shader per token (at most 4 channels, each its
  // K taps and K - 1 shifts; the tree; the stores), against lavapipe's budget with a margin.
  const int64_t per = (d + 63) / 64, iterations = tokens * (per * (2 * kernel + 1) + 8);
  if (channels % d || d > 256 || iterations > 60000) {
    record_conv_silu(cl, dev, channels, kernel, tokens, x, x_stride, state, w, y, y_stride);
    const NormShape l2{d, tokens, norm_heads, y_stride, d, y_stride, d};
    if (norm_heads > 0) record_rms_norm(cl, dev, l2, NormMode::Scaled, eps / fd, 1.0f / std::sqrt(fd), y, y, y, y);
    return;
  }
  if (kernel < 2 || kernel > 8) throw VulkanError(fmt::format("conv_silu: kernel {} (2..8)", kernel));
  if (channels < 1 || tokens < 1) throw VulkanError("conv_silu: empty shape");
  struct Push {
    ConvPush conv;
    uint32_t d, norm_heads;
    float eps, post;
  };
  const Push push{{u32(channels, "channels"), static_cast<uint32_t>(kernel), u32(tokens, "tokens"), u32(x_stride, "x_stride"),
                   u32(y_stride, "y_stride")},
                  u32(d, "d"), u32(norm_heads, "norm_heads"), eps / fd, 1.0f / std::sqrt(fd)};
  const Pipeline& p = dev.pipelines().get("conv_silu_l2", 4, sizeof(Push));
  cl.dispatch(p, {x, state, w, y}, push, groups(channels / d, 1, "conv_silu_l2"));
}

namespace {

// lavapipe (gallivm) ends a shader invocation's loops once they have run 65,535 iterations in
// all, silently: a long run of the delta rule at d = 128 would stop part way. On a CPU-type device
// the step and the scan are therefore split into dispatches whose invocations stay under a budget
// (the state carries through the buffer between them, so the split changes no bit). Upper bounds
// of one invocation's loop iterations per token (step: its four loops over MAXC = 16 values and two
// sums of 16 partials; any d) and per chunk of 64 (scan), from the shaders' loops with 64 invocations.
constexpr int64_t kCpuLoopBudget = 50000;
constexpr int64_t kGdnStepRowsPerGroup = 4;  // gdn_step.comp RPW: state rows per workgroup
int64_t step_iterations_per_token() { return 4 * 16 + 2 * 16 + 1; }
int64_t scan_iterations_per_chunk(int64_t d) {
  const int64_t L = kGdnScanChunk, VB = kGdnScanRows, WG = 64;
  return 2 * ((d + 7) / 8 * (L * 8 / WG + 8 + L * 9) + 2 * L)  // A and B, in slices of 8 dims
         + (L * VB / WG) * (d + 1)        // right-hand sides
         + L * L / 2 + L                  // the solve and the decay sum
         + (L * VB / WG) * (d + L + 1)    // outputs
         + (VB * d / WG) * (L + 1);       // the state update
}

// gdn_step, gdn_step_reverse (workgroups of 4 state rows x value heads) or gdn_scan (blocks of kGdnScanRows value
// rows x value heads) over tokens first .. first + s.tokens - 1 of the bound rows.
void record_gdn(const char* shader, CommandList& cl, Device& dev, const GdnShape& s, int64_t first, float scale,
                BufferRange conv, BufferRange alpha, BufferRange beta, BufferRange params, BufferRange state, BufferRange o) {
  if (s.d < 1 || s.d > 256) throw VulkanError(fmt::format("{}: head dim {} (1..256)", shader, s.d));
  if (s.n_k_heads < 1 || s.n_v_heads % s.n_k_heads)
    throw VulkanError(fmt::format("{}: {} value heads over {} key heads", shader, s.n_v_heads, s.n_k_heads));
  if (s.tokens < 1) throw VulkanError(fmt::format("{}: no tokens", shader));
  const bool scan = std::strcmp(shader, "gdn_scan") == 0, reverse = std::strcmp(shader, "gdn_step_reverse") == 0;
  const Pipeline& p = dev.pipelines().get(shader, 6, sizeof(GdnPush));
  // Tokens per dispatch: all of them, but on a CPU-type device (above). The reverse path starts
  // from zero in every dispatch, so it cannot be split: a block longer than the budget allows
  // (~500 tokens; the model's blocks are 32) is refused there rather than silently cut short.
  if (dev.info().is_cpu() && reverse && s.tokens > kCpuLoopBudget / step_iterations_per_token())
    throw VulkanError(fmt::format("{}: a block of {} tokens is more than a CPU-type Vulkan device's shader loop limit "
                                  "allows in one dispatch ({} tokens)",
                                  shader, s.tokens, kCpuLoopBudget / step_iterations_per_token()));
  int64_t per = s.tokens;
  if (dev.info().is_cpu() && !reverse)
    per = scan ? std::max<int64_t>(1, kCpuLoopBudget / scan_iterations_per_chunk(s.d)) * kGdnScanChunk
               : std::max<int64_t>(1, kCpuLoopBudget / step_iterations_per_token());
  for (int64_t t0 = 0; t0 < s.tokens; t0 += per) {
    const int64_t n = std::min(per, s.tokens - t0);
    const GdnPush push{u32(s.d, "d"), u32(s.n_k_heads, "n_k_heads"), u32(s.n_v_heads, "n_v_heads"), u32(n, "tokens"),
                       u32(s.conv_stride, "conv_stride"), u32(s.gate_stride, "gate_stride"), u32(s.o_stride, "o_stride"),
                       scale, u32(first + t0, "first")};
    if (scan)
      cl.dispatch(p, {conv, alpha, beta, params, state, o}, push, groups(s.d, kGdnScanRows, shader),
                  groups(s.n_v_heads, 1, shader));
    else
      cl.dispatch(p, {conv, alpha, beta, params, state, o}, push, groups(s.d, kGdnStepRowsPerGroup, shader),
                  groups(s.n_v_heads, 1, shader));
  }
}

}  // namespace

void record_gdn_step(CommandList& cl, Device& dev, const GdnShape& s, float scale, BufferRange conv, BufferRange alpha,
                     BufferRange beta, BufferRange params, BufferRange state, BufferRange o) {
  record_gdn("gdn_step", cl, dev, s, 0, scale, conv, alpha, beta, params, state, o);
}

void record_gdn_scan(CommandList& cl, Device& dev, const GdnShape& s, float scale, BufferRange conv, BufferRange alpha,
                     BufferRange beta, BufferRange params, BufferRange state, BufferRange o) {
  record_gdn("gdn_scan", cl, dev, s, 0, scale, conv, alpha, beta, params, state, o);
}

GdnRuns gdn_causal_runs(int64_t n_past, int64_t tokens) {
  GdnRuns r;
  const int64_t lead = std::min(tokens, (kGdnScanChunk - n_past % kGdnScanChunk) % kGdnScanChunk);
  r.scan = (tokens - lead) / kGdnScanChunk * kGdnScanChunk;
  r.lead = r.scan > 0 ? lead : tokens;
  r.tail = tokens - r.lead - r.scan;
  return r;
}

void record_gdn_causal(CommandList& cl, Device& dev, const GdnShape& s, int64_t n_past, float scale, BufferRange conv,
                       BufferRange alpha, BufferRange beta, BufferRange params, BufferRange state, BufferRange o) {
  const GdnRuns r = gdn_causal_runs(n_past, s.tokens);
  GdnShape part = s;
  auto run = [&](const char* shader, int64_t first, int64_t n) {
    if (n == 0) return;
    part.tokens = n;
    record_gdn(shader, cl, dev, part, first, scale, conv, alpha, beta, params, state, o);
  };
  run("gdn_step", 0, r.lead);
  run("gdn_scan", r.lead, r.scan);
  run("gdn_step", r.lead + r.scan, r.tail);
}

void record_gdn_reverse(CommandList& cl, Device& dev, const GdnShape& s, float scale, BufferRange conv, BufferRange alpha,
                        BufferRange beta, BufferRange params, BufferRange scratch, BufferRange o) {
  record_gdn("gdn_step_reverse", cl, dev, s, 0, scale, conv, alpha, beta, params, scratch, o);
}

void record_kv_store(CommandList& cl, Device& dev, BufferRange x, int64_t tokens, int64_t values, int64_t x_stride,
                     DType type, const Buffer& cache, uint64_t row_bytes, DeviceWord n_past) {
  const uint32_t id = kv_type_id(type);
  if (tokens < 1) throw VulkanError("kv_store: no tokens");
  if (dtype_row_bytes(type, values) != row_bytes)
    throw VulkanError(fmt::format("kv_store: {} {} values do not make a row of {} bytes", values, dtype_name(type), row_bytes));
  const uint64_t bytes = static_cast<uint64_t>(tokens) * row_bytes;
  if (bytes > cache.size())
    throw VulkanError(fmt::format("kv_store: {} positions do not fit a cache of {} bytes", tokens, cache.size()));
  check_word(n_past, "kv_store");
  // The most words `bytes` from any byte offset can touch.
  const uint64_t words = (bytes + 3) / 4 + 1;
  const Pipeline& p = dev.pipelines().get("kv_store", 3, sizeof(KvStorePush));
  const KvStorePush push{u32(row_bytes, "row_bytes"), u32(values, "values"), n_past.index, u32(tokens, "tokens"),
                         u32(x_stride, "x_stride"), id};
  cl.dispatch(p, {x, whole(cache), n_past.words}, push, groups(static_cast<int64_t>(words), 64, "kv_store"));
}

void record_elementwise(CommandList& cl, Device& dev, Elementwise op, const ElementwiseShape& s, BufferRange x,
                        BufferRange y) {
  if (s.n < 1 || s.rows < 1) throw VulkanError("elementwise: empty shape");
  const int64_t seg = s.seg ? s.seg : s.n;
  const Pipeline& p = dev.pipelines().get("elementwise", 2, sizeof(ElementwisePush));
  const ElementwisePush push{u32(s.n, "n"),     u32(s.rows, "rows"),   u32(s.y_row, "y_row"), u32(s.x_row, "x_row"),
                             u32(seg, "seg"),   u32(s.x_seg, "x_seg"), u32(s.x_off, "x_off"), static_cast<uint32_t>(op)};
  cl.dispatch(p, {x, y}, push, groups(s.n * s.rows, 64, "elementwise"));
}

void record_sigmoid_gate_quantize(CommandList& cl, Device& dev, const ElementwiseShape& s, BufferRange x, BufferRange y,
                                  const Q8Activations& a) {
  if (s.n % (a.kind == Q8Kind::Q8_K ? 256 : 32) || s.n != a.cols || s.rows < 1 || s.rows > a.rows)
    throw VulkanError(fmt::format("sigmoid_gate_quantize: {} x {} rows into {} scratch of {} x {}", s.rows, s.n,
                                  q8_kind_name(a.kind), a.rows, a.cols));
  struct GatePush {
    QuantizePush q;
    uint32_t g_row, seg, g_seg, g_off;
  };
  const int64_t seg = s.seg ? s.seg : s.n;
  const GatePush push{{u32(s.n, "cols"), u32(s.rows, "rows"), u32(s.y_row, "x_stride")},
                      u32(s.x_row, "g_row"), u32(seg, "seg"), u32(s.x_seg, "g_seg"), u32(s.x_off, "g_off")};
  const Pipeline& p = dev.pipelines().get(quantize_variant("sigmoid_gate_quantize", a.kind), 4, sizeof(GatePush));
  if (a.kind == Q8Kind::Q8_K)  // a workgroup per super-block (quantize_q8_k_activation.comp GATE)
    cl.dispatch(p, {y, whole(a.quants), whole(a.scales), x}, push, groups(s.n / 256, 1, "sigmoid_gate_quantize (super-blocks)"),
                groups(s.rows, 1, "sigmoid_gate_quantize (rows)"));
  else
    cl.dispatch(p, {y, whole(a.quants), whole(a.scales), x}, push, groups(s.rows * (s.n / 32), 64, "sigmoid_gate_quantize"));
}

}  // namespace clover::vulkan
