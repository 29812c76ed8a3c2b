#include "backend/vulkan/executor/vulkan_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "backend/routing.h"
#include "backend/vulkan/moe_ops.h"
#include "backend/vulkan/ops.h"
#include "backend/vulkan/rope_table.h"
#include "kernels/convert.h"

namespace clover::vulkan {

using backend::LogitRows;
using backend::Pass;
using backend::PassKind;
using model::ModelError;

namespace {

uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }
// The activation kinds products with these weights read (VulkanExecutor::quantize).
unsigned need(DType t) { return reads_q8_activations(t) ? 1u << static_cast<int>(activation_kind(t)) : 0u; }
unsigned need(const DeviceMatrix& m) { return need(m.type); }
unsigned need(const DeviceExperts& m) { return need(m.type); }

}  // namespace

// Scratch for the largest pass, allocated once: a warm pass allocates nothing. Row strides are
// rounded (stride()) so that any row of any matrix can start a binding.
struct VulkanExecutor::Scratch {
  int64_t sE = 0, sC = 0, sO = 0, sHv = 0, sQG = 0, sQ = 0, sKV = 0, sNE = 0, sFF = 0, sFS = 0;
  Buffer x, h, y;                        // [B][sE]
  Buffer qkv, conv;                      // [B][sC]
  Buffer z, o;                           // [B][sO]
  Buffer alpha, beta;                    // [B][sHv]
  Buffer rev_alpha, rev_beta;            // [B][sHv]   the reverse path's gates (denoising passes)
  Buffer rev_state;                      // [Hv][d][d] the reverse path's R, zeroed by its shader
  std::vector<Buffer> denoise_state;     // per denoising pass of a stack: a copy of its sequence's state
  std::vector<const Buffer*> gdn_state;  // per pass of the stack: the state buffer its GDN layers advance
  Buffer qg;                             // [B][sQG]  per head [query | gate]
  Buffer q, attn;                        // [B][sQ]
  Buffer k, v;                           // [B][sKV]
  Buffer attn_part;                      // split-K attention's partials (ops.h attention_split_floats)
  Buffer router;                         // per layer a slice: [B][sNE] logits
  uint64_t router_slice = 0;
  Buffer ids;                            // per layer a slice: [B * k] chosen experts
  uint64_t ids_slice = 0;
  Buffer routed;                         // one word: moe_router.comp GROUP's count of routed tokens (0 between passes)
  Buffer wts;                            // [B * k]
  Buffer groups;                         // moe_group_ints(NE, B, k)
  Buffer g, u;                           // [B * k][sFF]
  Buffer d;                              // [B * k][E]
  Buffer gs, us;                         // [B][sFS]
  Buffer ds;                             // [B][E]
  Buffer gamma;                          // [B]
  Buffer embd_host, rope_host;           // host-visible, rewritten before every pass
  Buffer params_host;                    // host-visible: per stacked pass its n_past (ops.h DeviceWord)
  Buffer ids_host;                       // host-visible: per layer [N * k] routing ids, copied at the pass's end
  int64_t head_rows = 0;                 // rows of logits one head list computes
  Buffer hsel;                           // [head_rows][sE]
  Buffer logits;                         // [head_rows][V]
  Buffer top;                            // [head_rows][select_top_words(kMaxTop)], host-visible
  std::vector<float> rope;
  std::vector<float> router_host;
  std::vector<uint8_t> seen;
  int64_t extra_dispatches = 0;          // of matrices split over several dispatches, all layers
};

int64_t VulkanExecutor::stride(int64_t n) const {
  return static_cast<int64_t>(round_up(static_cast<uint64_t>(std::max<int64_t>(n, 1)), dev_->offset_alignment() / 4));
}

BufferRange VulkanExecutor::rows(const Buffer& b, int64_t row0, int64_t row_stride) const {
  return {&b, static_cast<uint64_t>(row0 * row_stride) * sizeof(float), 0};
}

VulkanExecutor::VulkanExecutor(const model::Model& model, const Options& opts)
    : model_(model),
      hp_(model.hp()),
      max_batch_(std::max(1, opts.max_batch)),
      first_layer_(std::clamp(opts.first_layer, 0, model.hp().n_layer)),
      gdn_scan_(opts.gdn_scan), placement_(opts.placement) {
  std::string error;
  InstanceOptions io;
  io.validate = opts.validate;
  instance_ = Instance::create(io, error);
  if (!instance_) throw VulkanError(fmt::format("--device {}: {}", opts.device, error));
  const int index = instance_->resolve(opts.device == "vulkan" ? "" : opts.device);
  dev_ = std::make_unique<Device>(*instance_, index);
  if (opts.binding_limit) dev_->set_binding_limit(opts.binding_limit);
  const DeviceInfo& info = dev_->info();
  name_ = fmt::format("vulkan:{} ({})", index, info.name);
  if (opts.verbose) std::fprintf(stderr, "vulkan: running on %s\n", name_.c_str());

  // Progress redrawn in place on a terminal; one line at the end otherwise (logs, tests).
  int last_pct = -1;
  const bool tty = isatty(fileno(stderr)) != 0;
  if (!opts.experts_on_host.empty() && static_cast<int>(opts.experts_on_host.size()) != hp_.n_layer)
    throw VulkanError(fmt::format("a placement of {} layers for a model of {}", opts.experts_on_host.size(), hp_.n_layer));
  bool any_on_host = false;
  for (int il = first_layer_; il < static_cast<int>(opts.experts_on_host.size()); ++il)  // the device's layers only
    any_on_host |= std::find(opts.experts_on_host[il].begin(), opts.experts_on_host[il].end(), true) != opts.experts_on_host[il].end();
  w_ = upload_weights(*dev_, model, opts.experts_on_host, first_layer_, [&](uint64_t done, uint64_t total) {
    if (!opts.verbose || total == 0) return;
    const int pct = static_cast<int>(100 * done / total);
    if ((tty && pct != last_pct) || done == total) {
      std::fprintf(stderr, "%svulkan: uploaded weights %3d%% (%.1f of %.1f MiB)%s", tty ? "\r" : "", pct, done / 1048576.0,
                   total / 1048576.0, done == total ? "\n" : "");
      last_pct = pct;
    }
  });

  // Scratch for the largest pass.
  s_ = std::make_unique<Scratch>();
  Scratch& s = *s_;
  const int64_t B = max_batch_, E = hp_.n_embd, k = hp_.n_expert_used, NE = hp_.n_expert;
  s.sE = stride(E);
  s.sC = stride(hp_.gdn_qkv_dim());
  s.sO = stride(hp_.gdn_v_dim());
  s.sHv = stride(hp_.gdn_v_heads);
  s.sQG = stride(2LL * hp_.n_head * hp_.head_dim);
  s.sQ = stride(static_cast<int64_t>(hp_.n_head) * hp_.head_dim);
  s.sKV = stride(static_cast<int64_t>(hp_.n_head_kv) * hp_.head_dim);
  s.sNE = stride(NE);
  s.sFF = stride(hp_.n_ff_exp);
  s.sFS = stride(hp_.n_ff_shexp);
  const uint64_t align = dev_->offset_alignment();
  auto mk = [&](uint64_t floats, Residency r = Residency::Device) {
    return dev_->create_buffer(std::max<uint64_t>(floats, 1) * sizeof(float), MemoryPurpose::Scratch, r);
  };
  s.x = mk(B * s.sE), s.h = mk(B * s.sE), s.y = mk(B * s.sE);
  if (hp_.n_gdn_layers() > 0) {
    s.qkv = mk(B * s.sC), s.conv = mk(B * s.sC);
    s.z = mk(B * s.sO), s.o = mk(B * s.sO);
    s.alpha = mk(B * s.sHv), s.beta = mk(B * s.sHv);
    if (hp_.has_reverse_path) {
      s.rev_alpha = mk(B * s.sHv), s.rev_beta = mk(B * s.sHv);
      s.rev_state = mk(static_cast<uint64_t>(hp_.gdn_v_heads) * hp_.gdn_head_dim * hp_.gdn_head_dim);
    }
  }
  if (hp_.n_attn_layers() > 0) {
    s.qg = mk(B * s.sQG), s.q = mk(B * s.sQ), s.attn = mk(B * s.sQ);
    s.k = mk(B * s.sKV), s.v = mk(B * s.sKV);
    s.attn_part = mk(static_cast<uint64_t>(attention_split_floats(hp_.n_head, hp_.head_dim)));
  }
  s.router_slice = round_up(static_cast<uint64_t>(B * s.sNE) * 4, align);
  s.router = dev_->create_buffer(s.router_slice * hp_.n_layer, MemoryPurpose::Scratch);
  s.ids_slice = round_up(static_cast<uint64_t>(B * k) * 4, align);
  s.ids = dev_->create_buffer(s.ids_slice * hp_.n_layer, MemoryPurpose::Scratch);
  s.routed = dev_->create_buffer(4, MemoryPurpose::Scratch);
  dev_->fill_zero(s.routed);
  s.wts = mk(B * k);
  s.groups = mk(moe_group_ints(NE, B, k));
  s.g = mk(B * k * s.sFF), s.u = mk(B * k * s.sFF), s.d = mk(B * k * E);
  s.gs = mk(B * s.sFS), s.us = mk(B * s.sFS), s.ds = mk(B * E);
  s.gamma = mk(B);
  s.embd_host = mk(B * s.sE, Residency::Host);
  s.rope_host = mk(B * std::max(2, hp_.n_rot), Residency::Host);
  s.params_host = mk(B, Residency::Host);
  s.ids_host = mk(B * k * hp_.n_layer, Residency::Host);
  // The head: as many rows as fit one binding of logits (and the largest pass).
  const uint64_t row_bytes = static_cast<uint64_t>(hp_.n_vocab) * 4;
  s.head_rows = std::max<int64_t>(1, std::min<int64_t>(B, static_cast<int64_t>(dev_->binding_limit() / row_bytes)));
  s.hsel = mk(s.head_rows * s.sE);
  s.logits = mk(s.head_rows * hp_.n_vocab);
  s.top = mk(s.head_rows * select_top_words(sampling::kMaxTop), Residency::Host);
  s.seen.resize(static_cast<size_t>(NE));

  for (const DeviceLayer& L : w_.layers) {
    for (const DeviceMatrix* m : {&L.q, &L.k, &L.v, &L.o, &L.qkv, &L.gate, &L.beta, &L.alpha, &L.out, &L.router,
                                  &L.shared_gate_inp, &L.shared_gate, &L.shared_up, &L.shared_down})
      if (m->buffer) s.extra_dispatches += matmul_dispatches(*dev_, *m) - 1;
    for (const DeviceExperts* e : {&L.gate_exps, &L.up_exps, &L.down_exps})
      if (e->buffer) s.extra_dispatches += matmul_experts_dispatches(*dev_, *e) - 1;
  }
  const char* every = std::getenv("CLOVER_VK_RECORD_EVERY_PASS");
  if (!opts.record_every_pass && !(every && std::string(every) == "1"))
    cache_ = std::make_unique<PassCache>(static_cast<size_t>(std::max(1, opts.recorded_passes)));
  if (any_on_host)
    host_experts_ = std::make_unique<HostExperts>(model, max_batch_, opts.n_threads);
  const char* serial = std::getenv("CLOVER_VK_HOST_EXPERTS_SERIAL");
  overlap_host_ = opts.overlap_host_experts && !(serial && *serial && std::string(serial) != "0");
  if (any_on_host && opts.stream_rows > 0) {
    // Staging for kStreamedExperts experts of the largest layer with experts in RAM.
    stream_rows_ = opts.stream_rows;
    stream_ = std::make_unique<ExpertStream>();
    uint64_t bytes[3] = {};
    for (int il = 0; il < hp_.n_layer; ++il) {
      if (w_.layers[il].n_host_experts == 0) continue;
      const model::MoeWeights& M = model.weights().layers[il].moe;
      const model::ExpertsRef* t[3] = {&M.gate, &M.up, &M.down};
      for (int i = 0; i < 3; ++i)
        bytes[i] = std::max(bytes[i], device_experts_bytes(t[i]->expert(0), backend::kStreamedExperts));
    }
    stream_->gate = dev_->create_buffer(bytes[0], MemoryPurpose::Scratch);
    stream_->up = dev_->create_buffer(bytes[1], MemoryPurpose::Scratch);
    stream_->down = dev_->create_buffer(bytes[2], MemoryPurpose::Scratch);
    stream_->list = std::make_unique<CommandList>(*dev_, 64);
  }
  if (opts.verbose) std::fprintf(stderr, "vulkan: %s\n", memory_summary().c_str());
}

VulkanExecutor::~VulkanExecutor() = default;

uint64_t VulkanExecutor::device_memory_bytes() const { return dev_->memory().total(); }

int VulkanExecutor::n_threads() const { return host_experts_ ? host_experts_->n_threads() : 1; }

std::string VulkanExecutor::memory_summary() const {
  const MemoryAccount& m = dev_->memory();
  auto mib = [](uint64_t b) { return b / 1048576.0; };
  std::string s = fmt::format("device memory {:.1f} MiB: weights {:.1f}, caches {:.1f}, recurrent state {:.1f}, scratch {:.1f}, "
                              "staging {:.1f} ({} allocations)",
                              mib(m.total()), mib(m.bytes(MemoryPurpose::Weights)), mib(m.bytes(MemoryPurpose::Cache)),
                              mib(m.bytes(MemoryPurpose::State)), mib(m.bytes(MemoryPurpose::Scratch)),
                              mib(m.bytes(MemoryPurpose::Staging)), m.allocations());
  if (w_.n_host_experts == 0) return s;
  // Which experts the CPU computes: whole layers ("0-9"), and the layers split per expert.
  std::string whole, split;
  for (int il = 0; il < hp_.n_layer; ++il) {
    const DeviceLayer& L = w_.layers[il];
    if (L.n_host_experts == 0) continue;
    if (L.experts_on_device) {
      split += fmt::format("{}{} of layer {}'s {}", split.empty() ? "" : ", ", L.n_host_experts, il, hp_.n_expert);
      continue;
    }
    int j = il;
    while (j + 1 < hp_.n_layer && !w_.layers[j + 1].experts_on_device) ++j;
    whole += fmt::format("{}{}", whole.empty() ? "" : ",", j == il ? fmt::format("{}", il) : fmt::format("{}-{}", il, j));
    il = j;
  }
  const uint64_t saved = w_.host_expert_bytes;
  return s + fmt::format("; routed experts in RAM {} of {}{}{}{}{} ({} not uploaded)", w_.n_host_experts, w_.n_experts,
                         whole.empty() ? "" : ": layers ", whole, split.empty() ? "" : (whole.empty() ? ": " : "; "), split,
                         saved >= (1u << 20) ? fmt::format("{:.1f} MiB", mib(saved)) : fmt::format("{:.1f} KiB", saved / 1024.0));
}

std::unique_ptr<backend::Sequence> VulkanExecutor::new_sequence(int n_ctx, backend::KvTypes types) {
  return std::make_unique<VulkanSequence>(*dev_, hp_, n_ctx, types, first_layer_);
}

void VulkanExecutor::check(const Pass& p) const {
  if (!p.seq) throw ModelError("a pass without a sequence");
  const auto* seq = dynamic_cast<const VulkanSequence*>(p.seq);
  if (!seq || &seq->device() != dev_.get()) throw ModelError("the sequence belongs to another backend or device");
  backend::check_pass_tokens(p, hp_.n_vocab);
  backend::check_denoise_pass(p, max_batch_, hp_.has_reverse_path);
  backend::check_pass_outputs(p);
}

void VulkanExecutor::check_all(std::span<Pass> passes) const {
  if (passes.empty()) throw ModelError("a pass list needs at least one pass");
  for (const Pass& p : passes) check(p);
  for (size_t i = 0; i < passes.size(); ++i)
    for (size_t j = i + 1; j < passes.size(); ++j)
      if (passes[i].seq == passes[j].seq) throw ModelError("a stacked pass got the same sequence twice");
}

void VulkanExecutor::run_back(std::span<Pass> passes, const float* hidden) {
  check_all(passes);
  int64_t N = 0;
  for (const Pass& p : passes) N += static_cast<int64_t>(p.tokens.size());
  if (N > max_batch_)
    throw ModelError(fmt::format("a stacked pass of {} tokens exceeds the largest pass of {} tokens", N, max_batch_));
  hidden_in_ = hidden;
  try {
    run_stacked(passes);
  } catch (...) {
    hidden_in_ = nullptr;
    throw;
  }
  hidden_in_ = nullptr;
}

void VulkanExecutor::run(std::span<Pass> passes) {
  if (first_layer_ > 0)
    throw ModelError(fmt::format("this Vulkan executor runs layers {}-{} only (the back of a layer split: run_back)",
                                 first_layer_, hp_.n_layer - 1));
  check_all(passes);
  int64_t N = 0;
  for (const Pass& p : passes) N += static_cast<int64_t>(p.tokens.size());
  if (passes.size() == 1 && N > max_batch_ && passes.front().kind == PassKind::Causal) {
    // A long causal pass in chunks of the largest pass; only the last chunk's last row for Last.
    // Cuts fall on multiples of the GDN scan's chunk where one is in reach, so the pieces scan
    // the same aligned chunks as one pass would (ops.h record_gdn_causal): bitwise the same.
    Pass& p = passes.front();
    backend::PassStats total;
    for (int64_t b = 0, n = 0; b < N; b += n) {
      n = std::min<int64_t>(max_batch_, N - b);
      const int64_t at = p.seq->n_past(), cut = (at + n) / kGdnScanChunk * kGdnScanChunk;
      if (b + n < N && cut > at) n = cut - at;
      const bool last = b + n == N;
      const LogitRows rows = p.rows == LogitRows::All ? LogitRows::All : (last ? p.rows : LogitRows::None);
      const bool all = p.rows == LogitRows::All;
      Pass c = Pass::causal(*p.seq, p.tokens.subspan(static_cast<size_t>(b), static_cast<size_t>(n)), rows,
                            all && p.logits ? p.logits + b * hp_.n_vocab : p.logits);
      c.top_k = p.top_k;
      c.top = all && p.top ? p.top + b : p.top;
      run_stacked(std::span<Pass>(&c, 1));
      total += c.stats;
    }
    p.stats = total;
    return;
  }
  if (N > max_batch_)
    throw ModelError(fmt::format("a stacked pass of {} tokens exceeds the largest pass of {} tokens", N, max_batch_));
  run_stacked(passes);
}

VulkanExecutor::QuantActs VulkanExecutor::quantize(unsigned needed, BufferRange x, int64_t n_rows, int64_t cols,
                                                   int64_t x_stride, int slot) {
  QuantActs q;
  for (int k = 0; k < 3; ++k) {
    if (!(needed & (1u << k))) continue;
    q.kinds[k] = &q8_scratch(cols, k, slot);
    record_quantize(*rec_, *dev_, x, n_rows, cols, x_stride, *q.kinds[k]);
  }
  return q;
}

const Q8Activations& VulkanExecutor::q8_scratch(int64_t cols, int kind, int slot) {
  auto it = q8_.find({cols, kind, slot});
  if (it == q8_.end()) {
    // The widest use of each width: expert rows (B * k) for the expert FFN width, B otherwise.
    const int64_t max_rows = static_cast<int64_t>(max_batch_) * std::max(1, hp_.n_expert_used);
    it = q8_.emplace(std::make_tuple(cols, kind, slot), make_q8_activations(*dev_, max_rows, cols, static_cast<Q8Kind>(kind)))
             .first;
  }
  return it->second;
}

VulkanExecutor::QuantActs VulkanExecutor::swiglu_quantize(unsigned needed, BufferRange g, BufferRange u, int64_t n_rows,
                                                          int64_t cols, int64_t stride, int slot) {
  // One kind (every file but one mixing activation kinds on a down product's input): fused.
  for (int k = 0; k < 3; ++k)
    if (needed == (1u << k)) {
      QuantActs q;
      q.kinds[k] = &q8_scratch(cols, k, slot);
      record_swiglu_quantize(*rec_, *dev_, g, u, n_rows, cols, stride, *q.kinds[k]);
      return q;
    }
  record_swiglu(*rec_, *dev_, g, u, n_rows, cols, stride);
  return quantize(needed, g, n_rows, cols, stride, slot);
}

void VulkanExecutor::matmul(const DeviceMatrix& w, BufferRange x, int64_t x_stride, const QuantActs& q8, int64_t n_rows,
                            BufferRange y, int64_t y_stride) {
  record_matmul(*rec_, *dev_, w, x, x_stride, q8.for_type(w.type), n_rows, y, y_stride);
}

// Passes this long are keyed by their position too (recorded_pass.h pass_key): a causal pass
// shorter than one scan chunk never holds a whole aligned chunk, so its GDN runs are all steps
// whatever its position (ops.h gdn_causal_runs); a longer one's split depends on n_past % 64.
constexpr int64_t kPositionKeyedTokens = kGdnScanChunk;

void VulkanExecutor::run_stacked(std::span<Pass> passes) {
  Scratch& s = *s_;
  const int64_t E = hp_.n_embd;
  std::vector<int> row0;
  int N = 0;
  for (Pass& p : passes) {
    row0.push_back(N);
    N += static_cast<int>(p.tokens.size());
    p.stats = {};
    p.stats.tokens = static_cast<int64_t>(p.tokens.size());
  }

  // Host side: the tokens' embedding rows, the rope angles of their positions, and the pass
  // parameters (each pass's n_past) the recorded lists read when they run.
  {
    auto* embd = static_cast<float*>(s.embd_host.mapped());
    auto* params = static_cast<uint32_t*>(s.params_host.mapped());
    const model::MatRef& te = model_.weights().token_embd;
    std::vector<int64_t> pos;
    for (size_t i = 0; i < passes.size(); ++i) {
      params[i] = static_cast<uint32_t>(passes[i].seq->n_past());
      for (size_t t = 0; t < passes[i].tokens.size(); ++t) {
        float* dst = embd + (row0[i] + static_cast<int64_t>(t)) * s.sE;
        if (hidden_in_) {  // the back of a layer split: the rows the CPU's layers left
          std::memcpy(dst, hidden_in_ + (row0[i] + static_cast<int64_t>(t)) * E, sizeof(float) * static_cast<size_t>(E));
        } else {
          const int32_t tok = passes[i].tokens[t];
          const auto* row = static_cast<const uint8_t*>(te.data) + static_cast<size_t>(tok) * te.row_stride;
          kernels::dequantize_row(te.type, row, dst, E);
        }
        pos.push_back(passes[i].seq->n_past() + static_cast<int64_t>(t));
      }
    }
    if (hp_.n_attn_layers() > 0) {
      rope_table(pos.data(), N, hp_.n_rot, hp_.rope_theta, s.rope);
      std::memcpy(s.rope_host.mapped(), s.rope.data(), s.rope.size() * sizeof(float));
    }
  }

  // The pass's lists: recorded before for this shape, or recorded now.
  const std::vector<HeadRow> want = head_rows(passes, row0);
  const std::vector<int64_t> key = cache_ ? pass_key(passes, kPositionKeyedTokens) : std::vector<int64_t>{};
  RecordedPass* r = cache_ ? cache_->find(key) : nullptr;
  if (!r) {
    r = cache_ ? &cache_->add(key) : &plain_;
    try {
      record_pass(*r, passes, row0, N, want);
    } catch (...) {
      // The recording stays incomplete (never submitted); its list is closed now, before the
      // buffers it bound can go away.
      if (rec_) rec_->end();
      rec_ = nullptr;
      recording_ = nullptr;
      throw;
    }
  }
  bool submitted = false;  // segment i already submitted (beside the previous one's host work)
  for (size_t i = 0; i < r->used; ++i) {
    RecordedPass::Segment& seg = r->segments[i];
    if (!submitted) seg.list->submit();
    seg.list->wait();
    submitted = false;
    if (seg.head_chunk >= 0) read_head_chunk(want, static_cast<size_t>(seg.head_chunk));
    if (seg.host_step) seg.host_step();
    if (seg.beside_next) {
      if (overlap_host_ && i + 1 < r->used) {
        r->segments[i + 1].list->submit();
        submitted = true;
        ++overlapped_;
      }
      seg.beside_next();
    }
  }

  // Statistics (and the routing trace) from the routing ids of every layer ([layer][N * k] in
  // ids_host, copied there by the pass).
  const int k = hp_.n_expert_used, NE = hp_.n_expert;
  for (int il = first_layer_; il < hp_.n_layer; ++il) {
    const int32_t* ids = static_cast<const int32_t*>(s.ids_host.mapped()) + static_cast<size_t>(il) * N * k;
    for (size_t i = 0; i < passes.size(); ++i) {
      const int T = static_cast<int>(passes[i].tokens.size());
      passes[i].stats.expert_rows += static_cast<int64_t>(T) * k;
      passes[i].stats.distinct_experts += backend::distinct_experts(ids, row0[i], row0[i] + T, k, NE, s.seen);
    }
    if (routing_trace_) {
      // Probabilities as the CPU writes them: the softmax of the device's router logits.
      s.router_host.resize(static_cast<size_t>(N) * NE);
      std::vector<float> tmp(static_cast<size_t>(N) * s.sNE);
      dev_->download(s.router, s.router_slice * il, tmp.data(), tmp.size() * sizeof(float));
      for (int t = 0; t < N; ++t) std::memcpy(&s.router_host[static_cast<size_t>(t) * NE], &tmp[static_cast<size_t>(t) * s.sNE], NE * sizeof(float));
      std::vector<int32_t> chosen(static_cast<size_t>(N) * k);
      std::vector<float> weight(static_cast<size_t>(N) * k);
      backend::route_tokens(s.router_host.data(), N, NE, k, chosen.data(), weight.data());
      backend::write_routing_trace(routing_trace_, il, 0, s.router_host.data(), ids, N, NE, k);
    }
  }

  for (Pass& p : passes)
    if (p.kind == PassKind::Causal) static_cast<VulkanSequence&>(*p.seq).advance(static_cast<int>(p.tokens.size()));
}

std::vector<VulkanExecutor::HeadRow> VulkanExecutor::head_rows(std::span<Pass> passes, const std::vector<int>& row0) const {
  std::vector<HeadRow> want;
  for (size_t i = 0; i < passes.size(); ++i)
    for (const backend::WantedRow& r : backend::wanted_rows(passes[i])) want.push_back({row0[i] + r.pos, &passes[i], r.out});
  return want;
}

void VulkanExecutor::begin_segment() {
  RecordedPass& r = *recording_;
  if (r.used == r.segments.size()) r.segments.push_back({std::make_unique<CommandList>(*dev_, 1024)});
  RecordedPass::Segment& seg = r.segments[r.used++];
  seg.head_chunk = -1;
  seg.host_step = nullptr;
  seg.beside_next = nullptr;
  rec_ = seg.list.get();
  rec_->begin();
}

void VulkanExecutor::split_pass(std::function<void()> host_step, std::function<void()> beside_next) {
  rec_->end();
  RecordedPass::Segment& seg = recording_->segments[recording_->used - 1];
  seg.host_step = std::move(host_step);
  seg.beside_next = std::move(beside_next);
  begin_segment();
}

void VulkanExecutor::record_pass(RecordedPass& r, std::span<Pass> passes, const std::vector<int>& row0, int N,
                                 const std::vector<HeadRow>& want) {
  Scratch& s = *s_;
  const int64_t E = hp_.n_embd;
  r.complete = false;
  r.used = 0;
  recording_ = &r;
  begin_segment();
  // A denoising pass scans its GDN layers from a copy of its sequence's recurrent state, so the
  // sequence is left as it was (its attention layers write K/V only past n_past, which is free).
  s.gdn_state.assign(passes.size(), nullptr);
  if (static_cast<const VulkanSequence&>(*passes.front().seq).state_buffer()) {  // some GDN layer runs here
    size_t n_denoise = 0;
    for (const Pass& p : passes) n_denoise += p.kind == PassKind::Denoise;
    const Buffer& any_state = static_cast<const VulkanSequence&>(*passes.front().seq).state_buffer();
    while (s.denoise_state.size() < n_denoise)
      s.denoise_state.push_back(dev_->create_buffer(any_state.size(), MemoryPurpose::Scratch));
    size_t next = 0;
    for (size_t i = 0; i < passes.size(); ++i) {
      const Buffer& own = static_cast<const VulkanSequence&>(*passes[i].seq).state_buffer();
      if (passes[i].kind != PassKind::Denoise) {
        s.gdn_state[i] = &own;
        continue;
      }
      const Buffer& copy = s.denoise_state[next++];
      rec_->copy(own, 0, copy, 0, own.size());
      s.gdn_state[i] = &copy;
    }
  }
  ElementwiseShape copy{E, N, s.sE, s.sE};
  record_elementwise(*rec_, *dev_, Elementwise::Copy, copy, whole(s.embd_host), whole(s.x));
  {
    const NormShape rows_shape{E, N, 1, s.sE, 0, s.sE, 0};
    const DeviceLayer& L0 = w_.layers[first_layer_];
    QuantActs hq = write_quantized(mixer_needs(first_layer_), whole(s.h), N, E, s.sE, [&](const Q8Activations* a) {
      if (a)
        record_rms_norm_quantize(*rec_, *dev_, rows_shape, NormMode::Weighted, hp_.rms_eps, 1.0f, whole(s.x),
                                 whole(*L0.attn_norm), whole(*L0.attn_norm), whole(s.h), *a);
      else
        record_rms_norm(*rec_, *dev_, rows_shape, NormMode::Weighted, hp_.rms_eps, 1.0f, whole(s.x), whole(*L0.attn_norm),
                        whole(*L0.attn_norm), whole(s.h));
    });
    for (int il = first_layer_; il < hp_.n_layer; ++il) hq = record_layer(il, passes, row0, N, hq);
  }
  // The routing ids of every layer to the host, for the statistics.
  const uint64_t ids_bytes = static_cast<uint64_t>(N) * hp_.n_expert_used * sizeof(int32_t);
  std::vector<VkBufferCopy> regions;
  for (int il = first_layer_; il < hp_.n_layer; ++il) regions.push_back({s.ids_slice * il, ids_bytes * il, ids_bytes});
  rec_->copy(s.ids, s.ids_host, regions);
  // The head: its first chunk of rows in the same list, each further chunk in a list of its own
  // (the chunks share the logits scratch, read back in between).
  const size_t chunks = (want.size() + static_cast<size_t>(s.head_rows) - 1) / static_cast<size_t>(s.head_rows);
  for (size_t c = 0; c < chunks; ++c) {
    if (c > 0) {
      rec_->end();
      begin_segment();
    }
    record_head_chunk(want, c);
    r.segments[r.used - 1].head_chunk = static_cast<int>(c);
  }
  rec_->end();
  rec_ = nullptr;
  recording_ = nullptr;
  r.complete = true;
}

unsigned VulkanExecutor::mixer_needs(int il) const {
  const DeviceLayer& L = w_.layers[il];
  return L.recurrent ? need(L.qkv) | need(L.gate) | need(L.beta) | need(L.alpha) : need(L.q) | need(L.k) | need(L.v);
}

unsigned VulkanExecutor::moe_needs(int il) const {
  const DeviceLayer& L = w_.layers[il];
  return need(L.router) | need(L.shared_gate_inp) | need(L.shared_gate) | need(L.shared_up) | need(L.gate_exps) |
         need(L.up_exps);
}

VulkanExecutor::QuantActs VulkanExecutor::write_quantized(unsigned needed, BufferRange y, int64_t rows, int64_t cols,
                                                          int64_t stride,
                                                 const std::function<void(const Q8Activations*)>& op) {
  QuantActs q;
  const Q8Activations* first = nullptr;
  // Q8_0 and Q8_1 before Q8_K: every fusing op quantises those in its dispatch (the norms Q8_K too,
  // in rows of whole super-blocks).
  for (int k = 0; k < 3; ++k) {
    if (!(needed & (1u << k))) continue;
    q.kinds[k] = &q8_scratch(cols, k, 0);
    if (!first) first = q.kinds[k];
  }
  op(first);
  for (const Q8Activations* a : q.kinds)
    if (a && a != first) record_quantize(*rec_, *dev_, y, rows, cols, stride, *a);
  return q;
}

VulkanExecutor::QuantActs VulkanExecutor::record_layer(int il, std::span<Pass> passes, const std::vector<int>& row0, int N,
                                                       const QuantActs& hq) {
  Scratch& s = *s_;
  const DeviceLayer& L = w_.layers[il];
  const int64_t E = hp_.n_embd, NE = hp_.n_expert, k = hp_.n_expert_used;
  const NormShape rows_shape{E, N, 1, s.sE, 0, s.sE, 0};
  if (L.recurrent)
    record_gdn(il, passes, row0, N, hq);
  else
    record_attention(il, passes, row0, N, hq);
  // Each residual add, the norm after it and the quantisation of its output are one dispatch
  // (bitwise the three); after the MoE block the combine of its outputs is in it too.
  const QuantActs hm = write_quantized(moe_needs(il), whole(s.h), N, E, s.sE, [&](const Q8Activations* a) {
    record_add_rms_norm_quantize(*rec_, *dev_, rows_shape, hp_.rms_eps, whole(s.x), whole(s.y), whole(*L.post_norm),
                                 whole(s.h), a);
  });
  record_moe(il, N, hm);
  const MoeCombineInputs c{whole(s.d), whole(s.ds), whole(s.wts), whole(s.groups), whole(s.gamma), 1, NE, k};
  if (il + 1 < hp_.n_layer)
    return write_quantized(mixer_needs(il + 1), whole(s.h), N, E, s.sE, [&](const Q8Activations* a) {
      record_moe_combine_add_rms_norm(*rec_, *dev_, c, rows_shape, hp_.rms_eps, whole(s.x), whole(*w_.layers[il + 1].attn_norm),
                                      whole(s.h), a);
    });
  record_moe_combine(*rec_, *dev_, c.down, c.shared, c.weights, c.groups, c.gamma, c.gamma_stride, N, NE, k, E, whole(s.y),
                     s.sE);
  const ElementwiseShape add{E, N, s.sE, s.sE};
  record_elementwise(*rec_, *dev_, Elementwise::Add, add, whole(s.y), whole(s.x));
  return {};
}

void VulkanExecutor::record_gdn(int il, std::span<Pass> passes, const std::vector<int>& row0, int N,
                                const QuantActs& q8) {
  Scratch& s = *s_;
  const DeviceLayer& L = w_.layers[il];
  const int64_t E = hp_.n_embd, C = hp_.gdn_qkv_dim(), Hk = hp_.gdn_k_heads, Hv = hp_.gdn_v_heads, d = hp_.gdn_head_dim;
  matmul(L.qkv, whole(s.h), s.sE, q8, N, whole(s.qkv), s.sC);
  matmul(L.gate, whole(s.h), s.sE, q8, N, whole(s.z), s.sO);
  matmul(L.beta, whole(s.h), s.sE, q8, N, whole(s.beta), s.sHv);
  matmul(L.alpha, whole(s.h), s.sE, q8, N, whole(s.alpha), s.sHv);

  // Per sequence: the conv over its own window, then the L2 norm of the q and k heads
  // (ops::l2_norm: rms with eps / d, times 1 / sqrt(d)), in one dispatch (record_conv_silu_l2).
  for (size_t i = 0; i < passes.size(); ++i) {
    const auto& seq = static_cast<const VulkanSequence&>(*passes[i].seq);
    const int slot = seq.layer_slot(il);
    const int64_t T = static_cast<int64_t>(passes[i].tokens.size());
    record_conv_silu_l2(*rec_, *dev_, C, hp_.conv_kernel, T, rows(s.qkv, row0[i], s.sC), s.sC,
                        seq.conv_state(slot, *s.gdn_state[i]), whole(*L.conv1d), rows(s.conv, row0[i], s.sC), s.sC, d, 2 * Hk,
                        hp_.rms_eps);
  }
  // Per sequence: the delta rule over its own state; a causal pass's whole aligned chunks of 64
  // positions on the chunked scan (ops.h record_gdn_causal), a denoising block on the step.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (size_t i = 0; i < passes.size(); ++i) {
    const auto& seq = static_cast<const VulkanSequence&>(*passes[i].seq);
    const int slot = seq.layer_slot(il);
    const GdnShape g{d, Hk, Hv, static_cast<int64_t>(passes[i].tokens.size()), s.sC, s.sHv, s.sO};
    const BufferRange cv = rows(s.conv, row0[i], s.sC), al = rows(s.alpha, row0[i], s.sHv), be = rows(s.beta, row0[i], s.sHv);
    const BufferRange st = seq.ssm_state(slot, *s.gdn_state[i]), o = rows(s.o, row0[i], s.sO);
    if (passes[i].kind == PassKind::Causal && gdn_scan_)
      record_gdn_causal(*rec_, *dev_, g, seq.n_past(), scale, cv, al, be, whole(*L.params), st, o);
    else
      record_gdn_step(*rec_, *dev_, g, scale, cv, al, be, whole(*L.params), st, o);
  }
  // Denoising passes: the reverse in-block path added to the forward output (CLOVER-SPEC 3.3).
  // Its gates are projected for every row of the stack (a few outputs a row) when any pass uses it.
  bool any_reverse = false;
  for (const Pass& p : passes) any_reverse |= p.kind == PassKind::Denoise && p.reverse_path;
  if (any_reverse) {
    const QuantActs q8r = quantize(need(L.rev_beta) | need(L.rev_alpha), whole(s.h), N, E, s.sE);
    matmul(L.rev_beta, whole(s.h), s.sE, q8r, N, whole(s.rev_beta), s.sHv);
    matmul(L.rev_alpha, whole(s.h), s.sE, q8r, N, whole(s.rev_alpha), s.sHv);
    for (size_t i = 0; i < passes.size(); ++i) {
      if (passes[i].kind != PassKind::Denoise || !passes[i].reverse_path) continue;
      const GdnShape g{d, Hk, Hv, static_cast<int64_t>(passes[i].tokens.size()), s.sC, s.sHv, s.sO};
      record_gdn_reverse(*rec_, *dev_, g, scale, rows(s.conv, row0[i], s.sC), rows(s.rev_alpha, row0[i], s.sHv),
                         rows(s.rev_beta, row0[i], s.sHv), whole(*L.rev_params), whole(s.rev_state), rows(s.o, row0[i], s.sO));
    }
  }
  // Gated RMSNorm of every head's output, then the output projection.
  const NormShape gated{d, N, Hv, s.sO, d, s.sO, d};
  const QuantActs q8o = write_quantized(need(L.out), whole(s.o), N, Hv * d, s.sO, [&](const Q8Activations* a) {
    if (a)
      record_rms_norm_quantize(*rec_, *dev_, gated, NormMode::Gated, hp_.rms_eps, 1.0f, whole(s.o), whole(*L.norm),
                               whole(s.z), whole(s.o), *a);
    else
      record_rms_norm(*rec_, *dev_, gated, NormMode::Gated, hp_.rms_eps, 1.0f, whole(s.o), whole(*L.norm), whole(s.z),
                      whole(s.o));
  });
  matmul(L.out, whole(s.o), s.sO, q8o, N, whole(s.y), s.sE);
}

void VulkanExecutor::record_attention(int il, std::span<Pass> passes, const std::vector<int>& row0, int N,
                                      const QuantActs& q8) {
  Scratch& s = *s_;
  const DeviceLayer& L = w_.layers[il];
  const int64_t hd = hp_.head_dim, nh = hp_.n_head, nkv = hp_.n_head_kv;
  matmul(L.q, whole(s.h), s.sE, q8, N, whole(s.qg), s.sQG);
  matmul(L.k, whole(s.h), s.sE, q8, N, whole(s.k), s.sKV);
  matmul(L.v, whole(s.h), s.sE, q8, N, whole(s.v), s.sKV);

  // Per-head norms (the query half of each [query | gate] head), each with the rope at its row's
  // position in the same dispatch (record_rms_norm_rope).
  const NormShape qn{hd, N, nh, s.sQG, 2 * hd, s.sQ, hd};
  record_rms_norm_rope(*rec_, *dev_, qn, hp_.rms_eps, whole(s.qg), whole(*L.q_norm), whole(s.q), hp_.n_rot, whole(s.rope_host));
  const NormShape kn{hd, N, nkv, s.sKV, hd, s.sKV, hd};
  record_rms_norm_rope(*rec_, *dev_, kn, hp_.rms_eps, whole(s.k), whole(*L.k_norm), whole(s.k), hp_.n_rot, whole(s.rope_host));

  // Per sequence: K and V into its cache, then its rows attend to the cache (causally).
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (size_t i = 0; i < passes.size(); ++i) {
    const auto& seq = static_cast<const VulkanSequence&>(*passes[i].seq);
    const int slot = seq.layer_slot(il);
    const int64_t T = static_cast<int64_t>(passes[i].tokens.size());
    const DeviceWord n_past{whole(s.params_host), static_cast<uint32_t>(i)};  // read when the pass runs
    record_kv_store(*rec_, *dev_, rows(s.k, row0[i], s.sKV), T, nkv * hd, s.sKV, seq.types().k, seq.k_cache(slot),
                    seq.k_row_bytes(), n_past);
    record_kv_store(*rec_, *dev_, rows(s.v, row0[i], s.sKV), T, nkv * hd, s.sKV, seq.types().v, seq.v_cache(slot),
                    seq.v_row_bytes(), n_past);
    AttentionShape a;
    // A denoising block sees the prefix and the whole block, both directions.
    a.head_dim = hd, a.n_head = nh, a.n_head_kv = nkv, a.tokens = T;
    a.causal = passes[i].kind == PassKind::Causal;
    a.q_row = s.sQ, a.q_head = hd, a.o_row = s.sQ;
    const KvCacheView K{seq.types().k, whole(seq.k_cache(slot)), seq.k_row_bytes(), seq.k_head_bytes()};
    const KvCacheView V{seq.types().v, whole(seq.v_cache(slot)), seq.v_row_bytes(), seq.v_head_bytes()};
    // Split-K over the sequence's cache positions (ops.h): the chunks depend on n_ctx only.
    const AttentionSplit split{whole(s.attn_part), seq.n_ctx()};
    vulkan::record_attention(*rec_, *dev_, a, scale, rows(s.q, row0[i], s.sQ), K, V, rows(s.attn, row0[i], s.sQ), n_past,
                             &split);
  }
  // Output gate: attn *= sigmoid(the gate half of each head), then the output projection.
  ElementwiseShape gate{nh * hd, N, s.sQ, s.sQG};
  gate.seg = hd, gate.x_seg = 2 * hd, gate.x_off = hd;
  const QuantActs q8o = write_quantized(need(L.o), whole(s.attn), N, nh * hd, s.sQ, [&](const Q8Activations* a) {
    if (a)
      record_sigmoid_gate_quantize(*rec_, *dev_, gate, whole(s.qg), whole(s.attn), *a);
    else
      record_elementwise(*rec_, *dev_, Elementwise::MulSigmoid, gate, whole(s.qg), whole(s.attn));
  });
  matmul(L.o, whole(s.attn), s.sQ, q8o, N, whole(s.y), s.sE);
}

void VulkanExecutor::record_moe(int il, int N, const QuantActs& q8) {
  Scratch& s = *s_;
  const DeviceLayer& L = w_.layers[il];
  const int64_t E = hp_.n_embd, NE = hp_.n_expert, k = hp_.n_expert_used, ff = hp_.n_ff_exp, fs = hp_.n_ff_shexp;
  const BufferRange router{&s.router, s.router_slice * il, s.router_slice};
  const BufferRange ids{&s.ids, s.ids_slice * il, s.ids_slice};
  // The shared expert's first products (they read h only), and the rest of the layer's device
  // work once the rows are grouped: the shared expert's swiglu and down product, the routed
  // experts the device holds (gate and up read each routed row's token; down reads the routed
  // rows).
  const auto shared_first = [&] {
    matmul(L.shared_gate, whole(s.h), s.sE, q8, N, whole(s.gs), s.sFS);
    matmul(L.shared_up, whole(s.h), s.sE, q8, N, whole(s.us), s.sFS);
    matmul(L.shared_gate_inp, whole(s.h), s.sE, q8, N, whole(s.gamma), 1);
  };
  const auto shared_rest_and_device_experts = [&] {
    const QuantActs q8s = swiglu_quantize(need(L.shared_down), whole(s.gs), whole(s.us), N, fs, s.sFS, /*slot=*/1);
    if (L.experts_on_device) {
      record_matmul_experts(*rec_, *dev_, L.gate_exps, whole(s.h), s.sE, q8.for_type(L.gate_exps.type), whole(s.groups),
                            N * k, true, whole(s.g), s.sFF);
      record_matmul_experts(*rec_, *dev_, L.up_exps, whole(s.h), s.sE, q8.for_type(L.up_exps.type), whole(s.groups),
                            N * k, true, whole(s.u), s.sFF);
    }
    matmul(L.shared_down, whole(s.gs), s.sFS, q8s, N, whole(s.ds), E);
    if (L.experts_on_device) {
      const QuantActs q8g = swiglu_quantize(need(L.down_exps), whole(s.g), whole(s.u), N * k, ff, s.sFF);
      record_matmul_experts(*rec_, *dev_, L.down_exps, whole(s.g), s.sFF, q8g.for_type(L.down_exps.type),
                            whole(s.groups), N * k, false, whole(s.d), E);
    }
  };
  // Recorded in the order that lets independent products share a barrier (commands.h: a barrier
  // goes in only where a dispatch depends on one since the last): the shared expert's first
  // products beside the router, its down product beside the experts' gate and up. The same
  // dispatches in any order give the same bits.
  matmul(L.router, whole(s.h), s.sE, q8, N, router, s.sNE);
  if (L.n_host_experts == 0) shared_first();
  record_moe_route_and_group(*rec_, *dev_, router, N, NE, k, s.sNE, ids, whole(s.wts), whole(s.groups), whole(s.routed));
  if (L.n_host_experts == 0) {
    shared_rest_and_device_experts();
  } else {
    // Experts in host RAM: the pass splits after the routing, and the device's part of the layer
    // runs while the CPU computes their routed rows (hybrid_moe.cpp).
    run_host_experts(il, N, {&s.h, &s.groups, &s.g, &s.u, &s.d, s.sE, s.sFF}, [&] {
      shared_first();
      shared_rest_and_device_experts();
    });
  }
}

void VulkanExecutor::record_head_chunk(const std::vector<HeadRow>& want, size_t chunk) {
  Scratch& s = *s_;
  const int64_t V = hp_.n_vocab, E = hp_.n_embd;
  const size_t c0 = chunk * static_cast<size_t>(s.head_rows);
  const size_t n = std::min(want.size() - c0, static_cast<size_t>(s.head_rows));
  int k = 0;  // the largest selection any row of the chunk wants (a smaller one is its prefix)
  for (size_t r = 0; r < n; ++r) k = std::max(k, want[c0 + r].pass->top_k);
  // Runs of consecutive stacked rows normed in one dispatch each.
  for (size_t a = 0; a < n;) {
    size_t b = a + 1;
    while (b < n && want[c0 + b].row == want[c0 + b - 1].row + 1) ++b;
    const NormShape ns{E, static_cast<int64_t>(b - a), 1, s.sE, 0, s.sE, 0};
    record_rms_norm(*rec_, *dev_, ns, NormMode::Weighted, hp_.rms_eps, 1.0f, rows(s.x, want[c0 + a].row, s.sE),
                    whole(*w_.output_norm), whole(*w_.output_norm), rows(s.hsel, static_cast<int64_t>(a), s.sE));
    a = b;
  }
  const QuantActs q8 = quantize(need(w_.output), whole(s.hsel), static_cast<int64_t>(n), E, s.sE);
  matmul(w_.output, whole(s.hsel), s.sE, q8, static_cast<int64_t>(n), whole(s.logits), V);
  if (k > 0) record_select_top(*rec_, *dev_, whole(s.logits), static_cast<int64_t>(n), V, V, k, whole(s.top));
}

void VulkanExecutor::read_head_chunk(const std::vector<HeadRow>& want, size_t chunk) {
  Scratch& s = *s_;
  const int64_t V = hp_.n_vocab;
  const size_t c0 = chunk * static_cast<size_t>(s.head_rows);
  const size_t n = std::min(want.size() - c0, static_cast<size_t>(s.head_rows));
  int k = 0;
  bool rows_back = false;
  for (size_t r = 0; r < n; ++r) {
    k = std::max(k, want[c0 + r].pass->top_k);
    rows_back |= want[c0 + r].pass->logits != nullptr;
  }
  if (k > 0) {  // a few hundred bytes a row instead of the row
    const uint64_t words = select_top_words(k);
    const auto* w = static_cast<const uint32_t*>(s.top.mapped());
    for (size_t r = 0; r < n; ++r) {
      const HeadRow& x = want[c0 + r];
      if (x.pass->top_k == 0) continue;
      sampling::RowTop& t = x.pass->top[x.out];
      read_row_top(w + r * words, k, t);
      t.n = std::min(t.n, x.pass->top_k);
    }
  }
  if (!rows_back) return;
  // Rows are contiguous in the logits buffer; read them in one go, then scatter.
  std::vector<float> host(n * static_cast<size_t>(V));
  dev_->download(s.logits, 0, host.data(), host.size() * sizeof(float));
  for (size_t r = 0; r < n; ++r) {
    const HeadRow& x = want[c0 + r];
    if (x.pass->logits) std::memcpy(x.pass->logits + x.out * V, host.data() + r * V, sizeof(float) * static_cast<size_t>(V));
  }
}

}  // namespace clover::vulkan
