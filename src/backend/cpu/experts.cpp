#include "backend/cpu/experts.h"

#include <algorithm>

#include "kernels/vecmath.h"

namespace clover::backend::cpu {

namespace {
constexpr int64_t kRowsPerTask = 64;
constexpr int64_t kSerialSwigluValues = 32 * 1024;  // ~10 us of silu: less than a region's start and end
}

CpuExpertRunner::CpuExpertRunner(ThreadPool& pool, int64_t max_rows, int64_t n_embd, int64_t max_ff)
    : pool_(pool), n_embd_(n_embd) {
  gate_.resize(max_rows, max_ff);
  up_.resize(max_rows, max_ff);
  down_.resize(max_rows, n_embd);
  iota_.resize(max_rows);
  for (int64_t i = 0; i < max_rows; ++i) iota_[i] = static_cast<int32_t>(i);
}

void CpuExpertRunner::add_tasks(const ExpertWork& w, bool shared, int64_t rows, Matrix m) {
  for (int64_t o = 0; o < rows; o += kRowsPerTask) tasks_.push_back(Task{&w, shared, m, o, std::min(rows, o + kRowsPerTask)});
}

const kernels::MatRef& CpuExpertRunner::Task::weights() const {
  return matrix == Matrix::Gate ? work->gate : matrix == Matrix::Up ? work->up : work->down;
}

// A thread's next task is usually task i + 1 (its share is a run of tasks): when that one starts
// elsewhere than where task i ends, task i's last tile prefetches its first rows.
const void* CpuExpertRunner::then(int64_t i) const {
  if (i + 1 >= static_cast<int64_t>(tasks_.size())) return nullptr;
  const Task &tk = tasks_[i], &next = tasks_[i + 1];
  const kernels::MatRef& w = next.weights();
  if (w.data == tk.weights().data && next.o_begin == tk.o_end) return nullptr;  // the rows after these
  return kernels::row_address(w, next.o_begin);
}

void CpuExpertRunner::run(const float* x, int T, std::span<const ExpertWork> routed, int32_t n_routed, int64_t ff_routed,
                          const ExpertWork* shared, int64_t ff_shared) {
  auto order = [](const kernels::MatRef& m, bool is_shared) {
    return is_shared ? kernels::sum_order(m.type, m.rows, m.cols) : kernels::SumOrder::VecDot;
  };
  const int64_t ff_ld = gate_.cols;

  // Phase 1: gate x and up x for every output row. Each expert's gate rows, then its up rows, as
  // tasks in that order, so a thread's share streams each matrix from start to end (one jump per
  // matrix, where a task that did both jumped twice per 64 rows). The input is converted once per
  // activation type (files may mix weight types).
  tasks_.clear();
  for (const ExpertWork& w : routed) add_tasks(w, false, ff_routed, Matrix::Gate), add_tasks(w, false, ff_routed, Matrix::Up);
  if (shared) add_tasks(*shared, true, ff_shared, Matrix::Gate), add_tasks(*shared, true, ff_shared, Matrix::Up);
  in_acts_.reset(x, T, n_embd_, n_embd_);
  if (!routed.empty()) in_acts_.prepare({routed.front().gate.type, routed.front().up.type});
  if (shared) in_acts_.prepare({shared->gate.type, shared->up.type});
  pool_.parallel_for_owned(static_cast<int64_t>(tasks_.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const Task& tk = tasks_[i];
      const ExpertWork& w = *tk.work;
      const bool up = tk.matrix == Matrix::Up;
      const kernels::MatRef& m = tk.weights();
      kernels::matmul_selected(m, in_acts_.get(m.type), w.tokens, w.n, (up ? up_ : gate_).row(w.out_row), ff_ld,
                               tk.o_begin, tk.o_end, order(m, tk.shared), then(i));
    }
  });
  // act = silu(gate x) * up x, into gate_ (elementwise: the same bits in any split of a row), on
  // the calling thread for a decoding step's few rows, in a region of its own for a batch.
  const int64_t n_rows = n_routed + (shared ? T : 0);
  const auto swiglu_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t ff = r < n_routed ? ff_routed : ff_shared;
      kernels::swiglu_span(gate_.row(r), up_.row(r), ff, 0, ff);
    }
  };
  if (n_rows * ff_ld <= kSerialSwigluValues) swiglu_rows(0, n_rows);
  else pool_.parallel_for(n_rows, 1, swiglu_rows);

  // Phase 2: down projections. Routed rows and shared rows may have different widths and types.
  tasks_.clear();
  for (const ExpertWork& w : routed) add_tasks(w, false, n_embd_, Matrix::Down);
  if (shared) add_tasks(*shared, true, n_embd_, Matrix::Down);
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
                               order(w.down, tk.shared), then(i));
    }
  });
}

}  // namespace clover::backend::cpu
