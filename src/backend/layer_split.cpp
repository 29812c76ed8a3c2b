#include "backend/layer_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "backend/vulkan/ops.h"

namespace clover::backend {

using model::ModelError;

namespace {

// A snapshot of each side.
class SplitSnapshot final : public Snapshot {
 public:
  SplitSnapshot(std::unique_ptr<Snapshot> front, std::unique_ptr<Snapshot> back) : front(std::move(front)), back(std::move(back)) {}
  int n_past() const override { return front->n_past(); }
  size_t bytes() const override { return front->bytes() + back->bytes(); }
  std::unique_ptr<Snapshot> front, back;
};

std::string layer_range(int a, int b) { return a == b ? fmt::format("layer {}", a) : fmt::format("layers {}-{}", a, b); }

}  // namespace

SplitSequence::SplitSequence(const model::HParams& hp, int first_device_layer, KvTypes types, std::unique_ptr<Sequence> front,
                             std::unique_ptr<Sequence> back)
    : front_(std::move(front)), back_(std::move(back)) {
  for (int il = 0; il < first_device_layer; ++il) front_attn_ += hp.recurrent[il] ? 0 : 1;
  if (hp.n_attn_layers() > 0)
    kv_row_bytes_ = (dtype_row_bytes(types.k, hp.head_dim) + dtype_row_bytes(types.v, hp.head_dim)) * hp.n_head_kv;
}

void SplitSequence::reset() {
  front_->reset();
  back_->reset();
}

void SplitSequence::truncate(int n) {
  // Checked for the whole sequence first, so that neither side moves when the other cannot.
  if (n < 0 || n > n_past()) throw ModelError(fmt::format("cannot truncate a sequence of {} tokens to {}", n_past(), n));
  if (n != n_past() && recurrent_bytes() > 0)
    throw ModelError("the recurrent (GDN) state cannot be rewound: restore a snapshot instead of truncating");
  front_->truncate(n);
  back_->truncate(n);
}

std::unique_ptr<Snapshot> SplitSequence::new_snapshot() const {
  return std::make_unique<SplitSnapshot>(front_->new_snapshot(), back_->new_snapshot());
}

void SplitSequence::save(Snapshot& into) const {
  auto& s = dynamic_cast<SplitSnapshot&>(into);
  front_->save(*s.front);
  back_->save(*s.back);
}

void SplitSequence::restore(const Snapshot& from) {
  const auto* s = dynamic_cast<const SplitSnapshot*>(&from);
  if (!s) throw ModelError("the snapshot belongs to another backend");
  front_->restore(*s->front);
  back_->restore(*s->back);
}

size_t SplitSequence::attention_bytes(int n_attn_layers) const {
  return static_cast<size_t>(n_attn_layers) * static_cast<size_t>(n_past()) * kv_row_bytes_;
}

std::vector<uint8_t> SplitSequence::committed_state() const {
  // Each side: its attention layers' K and V, then its GDN layers' state.
  const std::vector<uint8_t> f = front_->committed_state(), b = back_->committed_state();
  const size_t fa = attention_bytes(front_attn_);
  const size_t ba = b.size() - back_->recurrent_bytes();
  std::vector<uint8_t> out;
  out.reserve(f.size() + b.size());
  out.insert(out.end(), f.begin(), f.begin() + static_cast<std::ptrdiff_t>(fa));
  out.insert(out.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(ba));
  out.insert(out.end(), f.begin() + static_cast<std::ptrdiff_t>(fa), f.end());
  out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(ba), b.end());
  return out;
}

LayerSplitExecutor::LayerSplitExecutor(std::unique_ptr<cpu::CpuExecutor> front, std::unique_ptr<vulkan::VulkanExecutor> back)
    : front_(std::move(front)), back_(std::move(back)), k_(back_->first_layer()) {
  const int L = back_->model().hp().n_layer;
  if (k_ < 1 || k_ >= L || front_->n_layers() != k_)
    throw ModelError(fmt::format("a layer split needs the CPU's layers 0-{} and the device's {}-{} (got {} and from {})", k_ - 1,
                                 k_, L - 1, front_->n_layers(), k_));
  if (front_->max_batch() != back_->max_batch())
    throw ModelError(fmt::format("a layer split of passes of {} tokens on the CPU and {} on the device", front_->max_batch(),
                                 back_->max_batch()));
  hidden_.resize(static_cast<size_t>(back_->max_batch()) * back_->model().hp().n_embd);
}

std::string LayerSplitExecutor::describe_layers() const {
  const int L = back_->model().hp().n_layer;
  return fmt::format("{} on the CPU, {} and the output head on {}", layer_range(0, k_ - 1), layer_range(k_, L - 1), back_->name());
}

std::string LayerSplitExecutor::placement() const {
  const std::string p = back_->placement();
  return p.empty() ? describe_layers() : describe_layers() + "; " + p;
}

std::unique_ptr<Sequence> LayerSplitExecutor::new_sequence(int n_ctx, KvTypes types) {
  return std::make_unique<SplitSequence>(back_->model().hp(), k_, types, front_->new_sequence(n_ctx, types),
                                         back_->new_sequence(n_ctx, types));
}

void LayerSplitExecutor::trace_routing(std::FILE* f) {
  front_->trace_routing(f);
  back_->trace_routing(f);
}

void LayerSplitExecutor::run(std::span<Pass> passes) {
  const model::HParams& hp = back_->model().hp();
  const int B = max_batch();
  if (passes.empty()) throw ModelError("a pass list needs at least one pass");
  int64_t N = 0;
  for (const Pass& p : passes) {
    if (!p.seq) throw ModelError("a pass without a sequence");
    if (!dynamic_cast<const SplitSequence*>(p.seq)) throw ModelError("the sequence belongs to another backend");
    check_pass_tokens(p, hp.n_vocab);
    check_denoise_pass(p, B, hp.has_reverse_path);
    check_pass_outputs(p);
    for (const Pass& q : passes)
      if (&q != &p && q.seq == p.seq) throw ModelError("a stacked pass got the same sequence twice");
    N += static_cast<int64_t>(p.tokens.size());
  }
  if (passes.size() == 1 && N > B && passes.front().kind == PassKind::Causal) {
    // A long causal pass in the Vulkan executor's chunks (VulkanExecutor::run): cuts at multiples
    // of the GDN scan's chunk where one is in reach; only the last chunk's last row for Last.
    Pass& p = passes.front();
    PassStats total;
    for (int64_t b = 0, n = 0; b < N; b += n) {
      n = std::min<int64_t>(B, N - b);
      const int64_t at = p.seq->n_past(), cut = (at + n) / vulkan::kGdnScanChunk * vulkan::kGdnScanChunk;
      if (b + n < N && cut > at) n = cut - at;
      const bool last = b + n == N, all = p.rows == LogitRows::All;
      Pass c = Pass::causal(*p.seq, p.tokens.subspan(static_cast<size_t>(b), static_cast<size_t>(n)),
                            all ? LogitRows::All : (last ? p.rows : LogitRows::None),
                            all && p.logits ? p.logits + b * hp.n_vocab : p.logits);
      c.top_k = p.top_k;
      c.top = all && p.top ? p.top + b : p.top;
      run_split(std::span<Pass>(&c, 1));
      total += c.stats;
    }
    p.stats = total;
    return;
  }
  if (N > B) throw ModelError(fmt::format("a stacked pass of {} tokens exceeds the largest pass of {} tokens", N, B));
  run_split(passes);
}

void LayerSplitExecutor::run_split(std::span<Pass> passes) {
  // The same passes on each side's own sequence; the CPU's part wants no rows of logits.
  front_passes_.assign(passes.begin(), passes.end());
  back_passes_.assign(passes.begin(), passes.end());
  for (size_t i = 0; i < passes.size(); ++i) {
    auto& seq = static_cast<SplitSequence&>(*passes[i].seq);
    Pass& f = front_passes_[i];
    f.seq = &seq.front();
    f.rows = f.kind == PassKind::Causal ? LogitRows::None : f.rows;
    f.logits = nullptr, f.top_k = 0, f.top = nullptr;
    back_passes_[i].seq = &seq.back();
  }
  front_->run_front(front_passes_, hidden_.data());
  back_->run_back(back_passes_, hidden_.data());
  for (size_t i = 0; i < passes.size(); ++i) {
    PassStats s = back_passes_[i].stats;  // tokens once; the work of both sides' layers
    s.expert_rows += front_passes_[i].stats.expert_rows;
    s.distinct_experts += front_passes_[i].stats.distinct_experts;
    passes[i].stats = s;
  }
}

}  // namespace clover::backend
