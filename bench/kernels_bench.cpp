// Matmul throughput in GB/s of weight bytes, per dtype, shape, activation rows and ISA.
//
//   build-kernels/bench/kernels_bench [--benchmark_filter=Q4_0] [--benchmark_min_time=0.2]
//
// Shapes are the model's: expert up/gate [512 x 2048] and down [2048 x 512], the GDN input
// projection [8192 x 2048] and the LM head [248320 x 2048]. "cold" runs rotate over enough copies
// of the matrix (>= 256 MiB) that every call streams its weights from DRAM, as in decoding;
// "hot" runs reuse one copy (L2/L3 resident) and show the kernel's compute ceiling. "paired"
// runs alternate a cold GEMV with a plain read of as many cold bytes (the roofline), which is
// the comparison to trust on a shared machine.
// Single-threaded: the model splits output rows across its own threads.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/gdn.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
#include "roofline.h"
#include "runtime/huge_pages.h"

namespace {

using namespace clover;
using namespace clover::kernels;

constexpr size_t kColdBytes = size_t{256} << 20;

// The matrices of the benchmark being run (one set at a time, to bound memory).
struct MatrixSet {
  DType type{};
  Layout layout = Layout::RowMajor;
  int64_t rows = 0, cols = 0;
  size_t stride = 0;
  std::vector<std::unique_ptr<uint8_t[]>> copies;
};

MatrixSet& matrices(DType t, int64_t rows, int64_t cols, bool cold, Layout layout = Layout::RowMajor) {
  static MatrixSet set;
  const size_t stride = dtype_row_bytes(t, cols);
  const size_t bytes = stride * static_cast<size_t>(rows);
  const size_t want = cold ? std::max<size_t>(1, (kColdBytes + bytes - 1) / bytes) : 1;
  if (set.type != t || set.layout != layout || set.rows != rows || set.cols != cols || set.copies.size() < want) {
    set.copies.clear();
    set.type = t;
    set.layout = layout;
    set.rows = rows;
    set.cols = cols;
    set.stride = stride;
    // 64 random rows, repeated: quick to build, and the values do not change the speed.
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t pool_rows = std::min<int64_t>(64, rows);
    std::vector<uint8_t> pool(stride * pool_rows);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < pool_rows; ++r) {
      for (float& v : row) v = nd(rng);
      quantize_row(t, row.data(), pool.data() + r * stride, cols);
    }
    for (size_t c = 0; c < want; ++c) {
      set.copies.emplace_back(new uint8_t[bytes]);
      for (int64_t r = 0; r < rows; r += pool_rows) {
        const int64_t n = std::min(pool_rows, rows - r);
        std::memcpy(set.copies.back().get() + r * stride, pool.data(), n * stride);
      }
      if (layout != Layout::RowMajor) repack(MatRef{t, set.copies.back().get(), rows, cols, stride}, set.copies.back().get());
    }
  }
  return set;
}

void bm_matmul(benchmark::State& state, DType t, int64_t rows, int64_t cols, int64_t n, Isa isa, bool cold,
               Layout layout = Layout::RowMajor) {
  MatrixSet& m = matrices(t, rows, cols, cold, layout);
  const size_t copies = cold ? m.copies.size() : 1;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = nd(rng);
  ActRows acts;
  acts.convert(x.data(), n, cols, cols, activation_type(t));
  std::vector<float> y(static_cast<size_t>(n * rows));
  isa_force(isa);
  size_t c = 0;
  double best = 1e30;
  for (auto _ : state) {
    const MatRef w{t, m.copies[c].get(), rows, cols, m.stride, layout};
    const auto t0 = std::chrono::steady_clock::now();
    matmul(w, acts, y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    c = c + 1 == copies ? 0 : c + 1;
  }
  isa_force(isa_best());
  const double bytes = static_cast<double>(m.stride) * static_cast<double>(rows);
  // The machine is shared: the fastest single call is the best estimate of the uncontended speed.
  state.counters["best_GB/s"] = bytes / best * 1e-9;
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * n, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// The roofline: a plain streaming read of a 256 MiB buffer (fastest single call reported too).
void bm_read(benchmark::State& state) {
  const size_t n = kColdBytes / sizeof(uint64_t);
  static std::vector<uint64_t> buf(n, 1);
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    __m128i acc[4] = {};
    const auto* p = reinterpret_cast<const __m128i*>(buf.data());
    for (size_t i = 0; i < n / 2; i += 4) {
      for (int j = 0; j < 4; ++j) acc[j] = _mm_add_epi64(acc[j], _mm_load_si128(p + i + j));
    }
    benchmark::DoNotOptimize(acc);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  state.counters["GB/s"] = benchmark::Counter(double(kColdBytes), benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
  state.counters["best_GB/s"] = double(kColdBytes) / best * 1e-9;
}

// Decode GEMV against a plain read of the same number of cold bytes, the two interleaved call by
// call so that load from other processes hits both alike. Reports medians and the ratio: the
// fraction of the achievable single-thread bandwidth the kernel reaches.
size_t g_read_prefetch = 4096;

void bm_paired(benchmark::State& state, DType t, int64_t rows, int64_t cols, Isa isa, Layout layout = Layout::RowMajor) {
  MatrixSet& m = matrices(t, rows, cols, true, layout);
  const size_t copies = m.copies.size();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
  for (float& v : x) v = nd(rng);
  ActRows acts;
  acts.convert(x.data(), 1, cols, cols, activation_type(t));
  const size_t bytes = m.stride * static_cast<size_t>(rows);
  std::vector<double> tk, tr;
  isa_force(isa);
  size_t c = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    matmul(MatRef{t, m.copies[c].get(), rows, cols, m.stride, layout}, acts, y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(y.data());
    auto t1 = std::chrono::steady_clock::now();
    c = c + 1 == copies ? 0 : c + 1;
    benchmark::DoNotOptimize(bench::read_stream(m.copies[c].get(), bytes, g_read_prefetch));
    auto t2 = std::chrono::steady_clock::now();
    c = c + 1 == copies ? 0 : c + 1;
    tk.push_back(std::chrono::duration<double>(t1 - t0).count());
    tr.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  isa_force(isa_best());
  std::sort(tk.begin(), tk.end());
  std::sort(tr.begin(), tr.end());
  const double k_med = bytes / tk[tk.size() / 2] * 1e-9, r_med = bytes / tr[tr.size() / 2] * 1e-9;
  state.counters["kernel_GB/s"] = k_med;
  state.counters["read_GB/s"] = r_med;
  state.counters["ratio"] = k_med / r_med;
  state.counters["kernel_best"] = bytes / tk[0] * 1e-9;
  state.counters["read_best"] = bytes / tr[0] * 1e-9;
}

// A decoding step's GDN delta rule against a plain read of as many cold bytes, interleaved as in
// bm_paired: each call steps one layer's heads (heads x d x d floats of state, read and written
// back, on huge pages as the engine keeps them) from a rotation over 256 MiB of states, so every
// state comes from DRAM, as it does at the full size (30 layers x 2 MiB).
void bm_gdn_paired(benchmark::State& state, int64_t d, int64_t heads) {
  const size_t layer_floats = static_cast<size_t>(heads * d * d), layer_bytes = layer_floats * sizeof(float);
  const size_t layers = std::max<size_t>(2, kColdBytes / layer_bytes);
  runtime::HugePageVector<float> S(layer_floats * layers, 0.01f);
  std::vector<uint8_t> plain(layer_bytes * layers, 1);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<float> q(static_cast<size_t>(d)), k(q.size()), v(q.size()), o(q.size());
  for (float* x : {q.data(), k.data(), v.data()})
    for (int64_t i = 0; i < d; ++i) x[i] = nd(rng);
  std::vector<double> tk, tr;
  size_t c = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t h = 0; h < heads; ++h)
      gdn_step(S.data() + c * layer_floats + static_cast<size_t>(h * d * d), q.data(), k.data(), v.data(), 0.99f, 0.5f,
               0.088f, d, o.data());
    benchmark::DoNotOptimize(o.data());
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(bench::read_stream(plain.data() + c * layer_bytes, layer_bytes, g_read_prefetch));
    auto t2 = std::chrono::steady_clock::now();
    c = c + 1 == layers ? 0 : c + 1;
    tk.push_back(std::chrono::duration<double>(t1 - t0).count());
    tr.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  std::sort(tk.begin(), tk.end());
  std::sort(tr.begin(), tr.end());
  const double k_med = layer_bytes / tk[tk.size() / 2] * 1e-9, r_med = layer_bytes / tr[tr.size() / 2] * 1e-9;
  state.counters["state_GB/s"] = k_med;  // of the state read (as much again is written back)
  state.counters["read_GB/s"] = r_med;
  state.counters["ratio"] = k_med / r_med;
}

void bm_convert(benchmark::State& state, DType t, int64_t cols, int64_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = nd(rng);
  ActRows acts;
  for (auto _ : state) {
    acts.convert(x.data(), n, cols, cols, t);
    benchmark::DoNotOptimize(acts.row(0));
  }
  state.SetItemsProcessed(state.iterations() * n * cols);
}

// The compute roofline of one core: 24 independent chains of 512-bit vpdpbusd (64 int8
// multiply-adds each) or of 512-bit fp32 FMAs (16 each), enough to cover their latency. Reported
// as G multiply-adds per second (docs/benchmarks.md: why a 32-position block pass is compute-bound).
#define CLOVER_PEAK_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
CLOVER_PEAK_TARGET inline void peak_init(__m512i& a, int k) { a = _mm512_set1_epi32(k); }
CLOVER_PEAK_TARGET inline void peak_init(__m512& a, int k) { a = _mm512_set1_ps(static_cast<float>(k)); }
CLOVER_PEAK_TARGET inline __m512i peak_step(__m512i a) { return _mm512_dpbusd_epi32(a, _mm512_set1_epi8(3), _mm512_set1_epi8(5)); }
CLOVER_PEAK_TARGET inline __m512 peak_step(__m512 a) { return _mm512_fmadd_ps(a, _mm512_set1_ps(1.0001f), _mm512_set1_ps(0.9999f)); }

template <class V, int MacsPerStep>
CLOVER_PEAK_TARGET void bm_peak(benchmark::State& state) {
  constexpr int kChains = 24;
  constexpr int64_t kSteps = 1 << 16;
  for (auto _ : state) {
    V acc[kChains];
    for (int k = 0; k < kChains; ++k) peak_init(acc[k], k);
    for (int64_t i = 0; i < kSteps; ++i) {
#pragma GCC unroll 24
      for (int k = 0; k < kChains; ++k) {
        acc[k] = peak_step(acc[k]);
        asm volatile("" : "+v"(acc[k]));
      }
    }
    benchmark::DoNotOptimize(acc);
  }
  state.counters["GMAC/s"] = benchmark::Counter(double(kSteps) * kChains * MacsPerStep,
                                                benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void register_all() {
  benchmark::RegisterBenchmark("roofline/read_256MiB", bm_read)->Unit(benchmark::kMicrosecond)->UseRealTime();
  if (isa_best() == Isa::Avx512) {
    benchmark::RegisterBenchmark("roofline/peak_int8_vpdpbusd", bm_peak<__m512i, 64>)->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark("roofline/peak_fp32_fma", bm_peak<__m512, 16>)->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  struct Shape { int64_t rows, cols; };
  const Shape shapes[] = {{128, 2048}, {512, 2048}, {2048, 512}, {8192, 2048}, {248320, 2048}};
  const DType types[] = {DType::Q4_0, DType::Q8_0, DType::BF16, DType::F16, DType::F32, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(isa_best())) isas.push_back(isa);
  }
  for (DType t : types) {
    for (const Shape& s : shapes) {
      const bool head = s.rows > 100000;
      for (bool cold : {true, false}) {
        if (head && !cold) continue;  // the head never fits in cache
        for (Isa isa : isas) {
          if (isa == Isa::Scalar && (s.rows * s.cols > (int64_t{1} << 20) || !cold)) continue;  // reference only
          for (int64_t n : {1, 8, 32}) {
            if (n > 1 && head) continue;
            const std::string name = std::string(dtype_name(t)) + "/" + std::to_string(s.rows) + "x" +
                                     std::to_string(s.cols) + "/n" + std::to_string(n) + "/" +
                                     std::string(isa_name(isa)) + (cold ? "/cold" : "/hot");
            benchmark::RegisterBenchmark(name.c_str(), bm_matmul, t, s.rows, s.cols, n, isa, cold, Layout::RowMajor)
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
          }
        }
      }
    }
  }
  for (DType t : types) {
    for (const Shape& s : shapes) {
      for (Isa isa : isas) {
        if (isa == Isa::Scalar) continue;
        const std::string name = "paired/" + std::string(dtype_name(t)) + "/" + std::to_string(s.rows) + "x" +
                                 std::to_string(s.cols) + "/" + std::string(isa_name(isa));
        benchmark::RegisterBenchmark(name.c_str(), bm_paired, t, s.rows, s.cols, isa, Layout::RowMajor)->Unit(benchmark::kMicrosecond);
      }
    }
  }
  // Repacked at load (kernels/repack.h): Q4_0 as Q4_0x16, Q4_K, IQ4_XS and Q5_K as Kx16, the
  // AVX-512 kernels' own layouts; named "Q4_0x16/...", "Q4_Kx16/...", "IQ4_XSx16/...", "Q5_Kx16/...".
  // On an AVX2 CPU, Q4_0x16 only (the one layout its kernels read), named .../avx2.
  if (isa_best() != Isa::Scalar) {
    const Isa isa = isa_best();
    for (const auto& [t, tag] : {std::pair{DType::Q4_0, "Q4_0x16"}, std::pair{DType::Q4_K, "Q4_Kx16"},
                                 std::pair{DType::IQ4_XS, "IQ4_XSx16"}, std::pair{DType::Q5_K, "Q5_Kx16"}}) {
      const Layout layout = t == DType::Q4_0 ? Layout::Q4_0x16 : Layout::Kx16;
      if (!layout_has_kernel(layout, isa)) continue;
      for (const Shape& s : shapes) {
        const bool head = s.rows > 100000;
        if (t != DType::Q4_0 && s.cols % 256 != 0) continue;
        for (bool cold : {true, false}) {
          if (head && !cold) continue;
          for (int64_t n : {1, 8, 32}) {
            if (n > 1 && head) continue;
            const std::string name = std::string(tag) + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                     "/n" + std::to_string(n) + "/" + std::string(isa_name(isa)) + (cold ? "/cold" : "/hot");
            benchmark::RegisterBenchmark(name.c_str(), bm_matmul, t, s.rows, s.cols, n, isa, cold, layout)
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
          }
        }
        const std::string name = "paired/" + std::string(tag) + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "/" +
                                 std::string(isa_name(isa));
        benchmark::RegisterBenchmark(name.c_str(), bm_paired, t, s.rows, s.cols, isa, layout)->Unit(benchmark::kMicrosecond);
      }
    }
  }
  // Clover's GDN layer: 32 value heads of 128 x 128.
  benchmark::RegisterBenchmark("paired/gdn_step/d128x32", bm_gdn_paired, int64_t{128}, int64_t{32})
      ->Unit(benchmark::kMicrosecond);
  for (DType t : {DType::Q8_0, DType::F16, DType::BF16}) {
    for (int64_t n : {1, 32}) {
      const std::string name = "convert/" + std::string(dtype_name(t)) + "/2048/n" + std::to_string(n);
      benchmark::RegisterBenchmark(name.c_str(), bm_convert, t, int64_t{2048}, n)->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* e = std::getenv("READ_PF")) g_read_prefetch = std::strtoul(e, nullptr, 10);
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
