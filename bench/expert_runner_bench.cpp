// The CPU side of a hybrid pass (docs/placement.md): the CPU expert runner alone on one layer of
// the Clover-35B-A3B's routed experts (256 experts of gate/up 512 x 2048 and down 2048 x 512,
// Q4_0 unless --type says, 8 experts per token), at a batch of 1 and of 32 tokens, against the machine's memory
// bandwidth (a plain streaming read over 1 GiB) and, pass by pass, against a plain read of the
// very bytes the pass read (the same experts, split over the same threads, alternated with the
// runner so that both see the same memory: on a machine whose bandwidth changes from minute to
// minute this ratio is the one to compare). Prints markdown rows for docs/benchmarks.md.
//
// usage: expert_runner_bench [-t THREADS] [--reps R] [--type 0|1|2 (Q4_0|Q8_0|Q4_K)] [--repack 0|1 (Q4_0
//        or Q4_K in the AVX-512 kernel's layout, as the engine repacks them under --no-mmap)]
//
// Each pass routes its tokens to fresh random experts (a uniform router), so the weights come
// from memory, not from the cache, as in a real pass over 40 layers. The weights a pass reads are
// the distinct experts routed to times 3 x 589,824 bytes (Q4_0; Q4_K 3 x 589,824 too).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "args.h"
#include "backend/cpu/experts.h"
#include "kernels/convert.h"
#include "kernels/repack.h"
#include "runtime/thread_pool.h"
#include "roofline.h"
#include "timing.h"

using namespace clover;

namespace {

// n matrices of rows x cols in one allocation, random values quantised to t.
struct Experts {
  int64_t rows, cols;
  size_t each;
  DType type;
  bench::HugeBuffer bytes;  // huge pages, as the engine's weights under --no-mmap
  Experts(DType t, int n, int64_t r, int64_t c, ThreadPool& pool)
      : rows(r), cols(c), each(dtype_row_bytes(t, c) * r), type(t), bytes(each * n) {
    const size_t stride = dtype_row_bytes(t, c);
    pool.parallel_for(static_cast<int64_t>(n) * r, 64, [&](int64_t b, int64_t e) {
      std::mt19937 rng(static_cast<uint32_t>(b));
      std::normal_distribution<float> nd(0.f, 0.05f);
      std::vector<float> row(c);
      for (int64_t i = b; i < e; ++i) {
        for (auto& x : row) x = nd(rng);
        kernels::quantize_row(t, row.data(), bytes.data() + i * stride, c);
      }
    });
  }
  kernels::Layout layout = kernels::Layout::RowMajor;
  // Every expert rewritten in place in the AVX-512 kernel's layout, as the engine does under
  // --no-mmap (kernels/repack.h).
  void repack(int n) {
    const kernels::Layout to = kernels::repack_layout(at(0));
    for (int e = 0; e < n; ++e) kernels::repack(at(e), bytes.data() + e * each);
    layout = to;
  }
  kernels::MatRef at(int e) const {
    return {type, bytes.data() + e * each, rows, cols, dtype_row_bytes(type, cols), layout};
  }
};

// GB/s of a plain read of 1 GiB of huge pages (bench::read_stream: 64-byte loads, prefetched),
// split over the pool's threads; best of reps.
double read_bandwidth(ThreadPool& pool, int reps) {
  bench::HugeBuffer buf(1ull << 30);
  auto* a = reinterpret_cast<uint64_t*>(buf.data());
  const int64_t n = static_cast<int64_t>(buf.size() / 8);
  pool.parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) { std::fill(a + b, a + e, uint64_t{1}); });
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()) * 8, 0);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = bench::now();
    const int64_t chunks = pool.size();
    pool.parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t w0 = c * n / chunks / 32 * 32, w1 = (c + 1) * n / chunks / 32 * 32;  // whole 256-byte steps
        sums[static_cast<size_t>(c) * 8] += bench::read_stream(buf.data() + w0 * 8, static_cast<size_t>(w1 - w0) * 8);
      }
    });
    t.push_back(bench::now() - t0);
  }
  return (1ull << 30) / *std::min_element(t.begin(), t.end()) / 1e9;  // the best run: the machine's peak
}

// A plain read of the bytes a pass's experts hold (each matrix in two halves, the tasks shared
// out over the pool's threads as the runner's are), for the "of a plain read" column.
void plain_read(ThreadPool& pool, const std::vector<backend::cpu::ExpertWork>& works, size_t each) {
  std::vector<const uint8_t*> halves;
  for (const auto& w : works)
    for (const kernels::MatRef* m : {&w.gate, &w.up, &w.down})
      for (int h = 0; h < 2; ++h) halves.push_back(static_cast<const uint8_t*>(m->data) + h * (each / 2));
  const size_t bytes = each / 2 / 256 * 256;  // whole steps of the read's loop
  static std::vector<uint64_t> sink(static_cast<size_t>(pool.size()) * 8);
  pool.parallel_for_on(static_cast<int64_t>(halves.size()), 1, [&](int thread, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sink[static_cast<size_t>(thread) * 8] += bench::read_stream(halves[i], bytes);
  });
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 20, type = 0, repack = 0;
  if (!bench::parse_int_flags(argc, argv, 1, {{"-t", &threads}, {"--reps", &reps}, {"--type", &type}, {"--repack", &repack}}) ||
      type < 0 || type > 2 || (repack == 1 && type == 1)) {
    std::fprintf(stderr, "usage: %s [-t THREADS] [--reps R] [--type 0|1|2 (Q4_0|Q8_0|Q4_K)] [--repack 0|1 (Q4_0, Q4_K)]\n",
                 argv[0]);
    return 2;
  }
  const DType t = type == 1 ? DType::Q8_0 : type == 2 ? DType::Q4_K : DType::Q4_0;
  const int NE = 256, k = 8, E = 2048, ff = 512;
  ThreadPool pool(threads);
  const double bw = read_bandwidth(pool, 10);
  Experts gate(t, NE, ff, E, pool), up(t, NE, ff, E, pool), down(t, NE, E, ff, pool);
  if (repack == 1)
    for (Experts* x : {&gate, &up, &down}) x->repack(NE);
  std::printf("CPU expert runner, one layer of clover-35b experts (%s%s, %d experts of %d x %d, %d per token), %d threads; "
              "memory read bandwidth %.1f GB/s\n\n",
              std::string(dtype_name(t)).c_str(), repack == 1 ? " repacked" : "", NE, ff, E, k, threads, bw);
  std::printf("| tokens | distinct experts / layer | ms / layer | tokens/s, 40 layers of experts in RAM | weights read GB/s | of bandwidth "
              "| of a plain read of the same bytes |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::mt19937 rng(7);
  for (int T : {1, 32}) {
    backend::cpu::CpuExpertRunner runner(pool, static_cast<int64_t>(T) * k, E, ff);
    std::vector<float> x(static_cast<size_t>(T) * E);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& v : x) v = nd(rng);
    std::vector<double> times, reads;
    double distinct_sum = 0;
    // Route: each token to k distinct random experts; group by expert.
    std::vector<std::vector<int32_t>> rows(NE);
    const auto route = [&] {
      for (auto& r : rows) r.clear();
      for (int tok = 0; tok < T; ++tok) {
        std::vector<int> ids(NE);
        std::iota(ids.begin(), ids.end(), 0);
        for (int j = 0; j < k; ++j) {
          std::swap(ids[j], ids[j + rng() % (NE - j)]);
          rows[ids[j]].push_back(tok);
        }
      }
      std::vector<backend::cpu::ExpertWork> works;
      int32_t out = 0;
      for (int e = 0; e < NE; ++e)
        if (!rows[e].empty()) {
          works.push_back({gate.at(e), up.at(e), down.at(e), rows[e].data(), static_cast<int32_t>(rows[e].size()), out});
          out += static_cast<int32_t>(rows[e].size());
        }
      return std::pair{works, out};
    };
    for (int r = 0; r < reps + 2; ++r) {
      const auto [works, out] = route();
      const double t0 = bench::now();
      runner.run(x.data(), T, works, out, ff, nullptr, 0);
      const double t1 = bench::now();
      // The plain read's pass: the same number of experts, freshly drawn (the runner's are in the cache now).
      auto [fresh, unused] = route();
      while (fresh.size() > works.size()) fresh.pop_back();
      const double t2 = bench::now();
      plain_read(pool, fresh, gate.each);
      const double t3 = bench::now();
      if (r >= 2) {
        times.push_back(t1 - t0), distinct_sum += static_cast<double>(works.size());
        reads.push_back((t3 - t2) * static_cast<double>(works.size()) / static_cast<double>(fresh.size()));
      }
    }
    const double ms = bench::median(times) * 1e3, distinct = distinct_sum / reps;
    const double bytes = distinct * (gate.each + up.each + down.each);
    std::printf("| %d | %.1f | %.2f | %.1f | %.1f | %.0f %% | %.0f %% |\n", T, distinct, ms, T / (40 * ms / 1e3),
                bytes / (ms / 1e3) / 1e9, 100 * bytes / (ms / 1e3) / 1e9 / bw, 100 * bench::median(reads) * 1e3 / ms);
  }
  return 0;
}
