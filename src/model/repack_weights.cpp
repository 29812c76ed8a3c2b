// Model::repack: the Q4_0, Q4_K, IQ4_XS and Q5_K matrices rewritten in place in the SIMD kernels' layouts.
#include <chrono>

#include "kernels/repack.h"
#include "model/model.h"
#include "runtime/thread_pool.h"

namespace clover::model {

RepackReport Model::repack(ThreadPool& pool, const std::function<void(uint64_t, uint64_t)>& progress, kernels::Isa isa) {
  RepackReport report;
  if (file_->mapped()) return report;
  const auto t0 = std::chrono::steady_clock::now();

  // The candidates: each as one matrix (a stack of experts is one matrix of all its rows: its
  // experts are consecutive and each a whole number of 16-row tiles, so no tile spans two).
  struct Job {
    MatRef* m;
    MatRef whole;
  };
  std::vector<Job> jobs;
  auto add = [&](MatRef& m) {
    if (kernels::repack_layout(m, isa) != kernels::Layout::RowMajor) jobs.push_back({&m, m});
  };
  auto add_experts = [&](ExpertsRef& e) {
    MatRef whole = e.first;
    whole.rows = e.first.rows * hp_.n_expert;
    if (e.expert_stride == e.first.row_stride * static_cast<size_t>(e.first.rows) &&
        kernels::repack_layout(e.first, isa) != kernels::Layout::RowMajor &&
        kernels::repack_layout(whole, isa) != kernels::Layout::RowMajor)
      jobs.push_back({&e.first, whole});
  };
  for (LayerWeights& L : w_.layers) {
    for (MatRef* m : {&L.attn.q, &L.attn.k, &L.attn.v, &L.attn.o, &L.gdn.qkv, &L.gdn.gate, &L.gdn.beta, &L.gdn.alpha,
                      &L.gdn.out, &L.gdn.rev_alpha, &L.gdn.rev_beta, &L.moe.router, &L.moe.shared_gate_inp,
                      &L.moe.shared_gate, &L.moe.shared_up, &L.moe.shared_down})
      add(*m);
    for (ExpertsRef* e : {&L.moe.gate, &L.moe.up, &L.moe.down}) add_experts(*e);
  }
  if (!w_.tied_output && w_.output.data != w_.token_embd.data) add(w_.output);

  uint64_t total = 0, done = 0;
  for (const Job& j : jobs) total += j.whole.row_stride * static_cast<uint64_t>(j.whole.rows);
  for (const Job& j : jobs) {
    const uint64_t bytes = j.whole.row_stride * static_cast<uint64_t>(j.whole.rows);
    uint8_t* dst = file_->writable(j.whole.data, bytes);
    pool.parallel_for(j.whole.rows / kernels::kTileRows, 16, [&](int64_t b, int64_t e) {
      kernels::repack_tiles(j.whole, dst, b, e);
    });
    j.m->layout = kernels::repack_layout(j.whole);
    done += bytes;
    ++report.matrices;
    if (progress) progress(done, total);
  }
  report.bytes = total;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  repacked_.matrices += report.matrices;
  repacked_.bytes += report.bytes;
  repacked_.seconds += report.seconds;
  return report;
}

}  // namespace clover::model
