// The CPU expert FFN runner: down_e(silu(gate_e x) * up_e x) for every routed row of a pass and,
// optionally, the shared expert for every token. The MoE layer of the CPU executor calls it for
// all experts; a hybrid backend calls it for the experts it keeps in system RAM.
//
// Work is split into (expert, output-row range) tasks so that one parallel region covers all
// experts of a phase: phase 1 the gate and up products, then swiglu, phase 2 the down products.
// Routed experts sum as llama.cpp's MUL_MAT_ID does (each type's vec_dot order), the shared
// expert as its dense product (kernels::sum_order).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/scratch.h"
#include "kernels/matmul.h"
#include "runtime/thread_pool.h"

namespace clover::backend::cpu {

// One expert's FFN over the input rows routed to it.
struct ExpertWork {
  kernels::MatRef gate, up, down;
  const int32_t* tokens = nullptr;  // input rows
  int32_t n = 0;                    // how many
  int32_t out_row = 0;              // its first output row
};

class CpuExpertRunner {
 public:
  // max_rows: the most output rows of one run (routed rows + shared rows).
  CpuExpertRunner(ThreadPool& pool, int64_t max_rows, int64_t n_embd, int64_t max_ff);

  // x: [T][n_embd] input rows. routed: experts of width ff_routed whose output rows are
  // [0, n_routed) together; shared (may be null): n == T rows from n_routed on, width ff_shared.
  // Afterwards out(r) is output row r ([n_embd]).
  void run(const float* x, int T, std::span<const ExpertWork> routed, int32_t n_routed, int64_t ff_routed,
           const ExpertWork* shared, int64_t ff_shared);
  const float* out(int32_t row) const { return down_.row(row); }
  // 0, 1, 2, ... (max_rows of them): the input rows of an expert that every token goes to.
  const int32_t* all_rows() const { return iota_.data(); }

 private:
  enum class Matrix : uint8_t { Gate, Up, Down };
  // Output-row range [o_begin, o_end) of one of an expert's products.
  struct Task {
    const ExpertWork* work;
    bool shared;
    Matrix matrix;
    int64_t o_begin, o_end;
    const kernels::MatRef& weights() const;
  };
  void add_tasks(const ExpertWork& w, bool shared, int64_t rows, Matrix m);
  const void* then(int64_t i) const;  // matmul's `then` for task i

  ThreadPool& pool_;
  int64_t n_embd_;
  Mat gate_, up_, down_;  // per output row: [R][max_ff], [R][max_ff], [R][n_embd]
  ActSet in_acts_;        // the input, per activation type
  kernels::ActRows acts_routed_, acts_shared_;  // swiglu outputs converted for the down products
  std::vector<int32_t> iota_;  // 0, 1, 2, ...: the down products read their rows in order
  std::vector<Task> tasks_;
};

}  // namespace clover::backend::cpu
