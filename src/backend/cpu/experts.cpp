#include "backend/cpu/experts.h"

#include <algorithm>

#include "kernels/vecmath.h"

namespace clover::backend::cpu {

namespace {
constexpr int64_t kRowsPerTask = 64;
}

CpuExpertRunner::CpuExpertRunner(ThreadPool& pool, int64_t max_rows, int64_t n_embd, int64_t max_ff)
    : pool_(pool), n_embd_(n_embd) {
  gate_.resize(max_rows, max_ff);
  up_.resize(max_rows, max_ff);
  down_.resize(max_rows, n_embd);
  iota_.resize(max_rows);
  for (int64_t i = 0; i < max_rows; ++i) iota_[i] = static_cast<int32_t>(i);
}

void CpuExpertRunner::add_tasks(const ExpertWork& w, bool shared, int64_t rows) {
  for (int64_t o = 0; o < rows; o += kRowsPerTask) tasks_.push_back(Task{&w, shared, o, std::min(rows, o + kRowsPerTask)});
}

void CpuExpertRunner::run(const float* x, int T, std::span<const ExpertWork> routed, int32_t n_routed, int64_t ff_routed,
                          const ExpertWork* shared, int64_t ff_shared) {
  auto order = [](const kernels::MatRef& m, bool is_shared) {
    return is_shared ? kernels::sum_order(m.type, m.rows, m.cols) : kernels::SumOrder::VecDot;
  };
  const int64_t ff_ld = gate_.cols;

  // Phase 1: act = silu(gate x) * up x for every output row. The input is converted once per
  // activation type (files may mix weight types).
  tasks_.clear();
  for (const ExpertWork& w : routed) add_tasks(w, false, ff_routed);
  if (shared) add_tasks(*shared, true, ff_shared);
  in_acts_.reset(x, T, n_embd_, n_embd_);
  if (!routed.empty()) in_acts_.prepare({routed.front().gate.type, routed.front().up.type});
  if (shared) in_acts_.prepare({shared->gate.type, shared->up.type});
  pool_.parallel_for_owned(static_cast<int64_t>(tasks_.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const Task& tk = tasks_[i];
      const ExpertWork& w = *tk.work;
      float* g = gate_.row(w.out_row);
      float* u = up_.row(w.out_row);
      kernels::matmul_selected(w.gate, in_acts_.get(w.gate.type), w.tokens, w.n, g, ff_ld, tk.o_begin, tk.o_end,
                               order(w.gate, tk.shared));
      kernels::matmul_selected(w.up, in_acts_.get(w.up.type), w.tokens, w.n, u, ff_ld, tk.o_begin, tk.o_end,
                               order(w.up, tk.shared));
      const int64_t ff = tk.shared ? ff_shared : ff_routed;
      for (int32_t r = 0; r < w.n; ++r) kernels::swiglu_span(g + r * ff_ld, u + r * ff_ld, ff, tk.o_begin, tk.o_end);
    }
  });

  // Phase 2: down projections. Routed rows and shared rows may have different widths and types.
  tasks_.clear();
  for (const ExpertWork& w : routed) add_tasks(w, false, n_embd_);
  if (shared) add_tasks(*shared, true, n_embd_);
  if (!routed.empty())
    acts_routed_.convert(gate_.row(0), n_routed, ff_routed, ff_ld, kernels::activation_type(routed.front().down.type));
  if (shared) acts_shared_.convert(gate_.row(n_routed), T, ff_shared, ff_ld, kernels::activation_type(shared->down.type));
  pool_.parallel_for_owned(static_cast<int64_t>(tasks_.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const Task& tk = tasks_[i];
      const ExpertWork& w = *tk.work;
      const kernels::ActRows& a = tk.shared ? acts_shared_ : acts_routed_;
      const int32_t first = tk.shared ? 0 : w.out_row;
      kernels::matmul_selected(w.down, a, iota_.data() + first, w.n, down_.row(w.out_row), n_embd_, tk.o_begin, tk.o_end,
                               order(w.down, tk.shared));
    }
  });
}

}  // namespace clover::backend::cpu
