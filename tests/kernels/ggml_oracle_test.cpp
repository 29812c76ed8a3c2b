// Bit-for-bit comparison with ggml itself: the prebuilt ggml v0.5.0 libraries that node-llama-cpp
// installs (npm test tooling, see tools/oracle). Skipped when they are not installed.
//
// Checked: fp16 / bf16 conversion, the file quantisers (quantize_row_q4_0_ref / q8_0_ref), the
// x86 activation quantiser of ggml-cpu (quantize_row_q8_0), and the Q4_0 / Q8_0 dot products.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/matmul.h"

namespace clover::kernels {
namespace {

struct GgmlBf16 { uint16_t bits; };

struct Ggml {
  void* base = nullptr;
  void* cpu = nullptr;
  uint16_t (*fp32_to_fp16)(float) = nullptr;
  GgmlBf16 (*fp32_to_bf16)(float) = nullptr;
  void (*q4_0_ref)(const float*, void*, int64_t) = nullptr;
  void (*q8_0_ref)(const float*, void*, int64_t) = nullptr;
  void (*q8_0_act)(const float*, void*, int64_t) = nullptr;
  void (*dot_q4_0)(int, float*, size_t, const void*, size_t, const void*, size_t, int) = nullptr;
  void (*dot_q8_0)(int, float*, size_t, const void*, size_t, const void*, size_t, int) = nullptr;
  std::string why;

  Ggml() {
    const char* src = std::getenv("CLOVER_SOURCE_DIR");
    const std::string dir =
        std::string(src ? src : CLOVER_SOURCE_DIR_DEFAULT) + "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/";
    base = dlopen((dir + "libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!base) {
      why = "ggml not installed (" + dir + ")";
      return;
    }
    // The CPU backend variant this machine can run.
    const char* variant = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16") ? "zen4"
                          : __builtin_cpu_supports("avx2") ? "haswell" : "x64";
    cpu = dlopen((dir + "libggml-cpu-" + variant + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!cpu) {
      why = std::string("cannot load ggml-cpu: ") + dlerror();
      return;
    }
    fp32_to_fp16 = reinterpret_cast<decltype(fp32_to_fp16)>(dlsym(base, "ggml_fp32_to_fp16"));
    fp32_to_bf16 = reinterpret_cast<decltype(fp32_to_bf16)>(dlsym(base, "ggml_fp32_to_bf16"));
    q4_0_ref = reinterpret_cast<decltype(q4_0_ref)>(dlsym(base, "quantize_row_q4_0_ref"));
    q8_0_ref = reinterpret_cast<decltype(q8_0_ref)>(dlsym(base, "quantize_row_q8_0_ref"));
    q8_0_act = reinterpret_cast<decltype(q8_0_act)>(dlsym(cpu, "quantize_row_q8_0"));
    dot_q4_0 = reinterpret_cast<decltype(dot_q4_0)>(dlsym(cpu, "ggml_vec_dot_q4_0_q8_0"));
    dot_q8_0 = reinterpret_cast<decltype(dot_q8_0)>(dlsym(cpu, "ggml_vec_dot_q8_0_q8_0"));
    auto init = reinterpret_cast<void (*)()>(dlsym(cpu, "ggml_cpu_init"));
    if (init) init();
    if (!fp32_to_fp16 || !fp32_to_bf16 || !q4_0_ref || !q8_0_ref || !q8_0_act || !dot_q4_0 || !dot_q8_0) {
      why = "ggml symbols missing";
    }
  }
  bool ok() const { return why.empty(); }
};

const Ggml& ggml() {
  static Ggml g;
  return g;
}

#define REQUIRE_GGML() \
  if (!ggml().ok()) GTEST_SKIP() << ggml().why

// Values that exercise every path: normal data, exact ties, all-zero and tiny blocks, and
// blocks whose largest magnitude is negative.
std::vector<float> tricky_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    float* v = x.data() + b * 32;
    const int kind = static_cast<int>(b % 6);
    for (int j = 0; j < 32; ++j) v[j] = nd(rng);
    if (kind == 1) {
      for (int j = 0; j < 32; ++j) v[j] = std::round(v[j] * 40.0f) + (j % 2 ? 0.5f : 0.0f);  // .5 ties
      v[0] = 127.0f;
    } else if (kind == 2) {
      for (int j = 0; j < 32; ++j) v[j] = 0.0f;
    } else if (kind == 3) {
      for (int j = 0; j < 32; ++j) v[j] *= 1e-6f;
    } else if (kind == 4) {
      v[7] = -9.0f;  // negative largest magnitude
    }
  }
  return x;
}

TEST(GgmlOracle, Fp16AndBf16) {
  REQUIRE_GGML();
  std::mt19937 rng(11);
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), ggml().fp32_to_fp16(f)) << f;
    ASSERT_EQ(fp32_to_bf16(f), ggml().fp32_to_bf16(f).bits) << f;
  }
}

TEST(GgmlOracle, FileQuantisersAreBitIdentical) {
  REQUIRE_GGML();
  const int64_t n = 32 * 600;
  const std::vector<float> x = tricky_values(n, 1);
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    std::vector<uint8_t> ours(dtype_row_bytes(t, n)), theirs(ours.size());
    quantize_row(t, x.data(), ours.data(), n);
    (t == DType::Q4_0 ? ggml().q4_0_ref : ggml().q8_0_ref)(x.data(), theirs.data(), n);
    EXPECT_EQ(ours, theirs) << dtype_name(t);
  }
}

TEST(GgmlOracle, ActivationQuantiserIsBitIdentical) {
  REQUIRE_GGML();
  const int64_t n = 32 * 600;
  const std::vector<float> x = tricky_values(n, 2);
  std::vector<BlockQ8_0> ours(n / 32), theirs(n / 32);
  quantize_row_q8_0_activation(x.data(), ours.data(), n);
  ggml().q8_0_act(x.data(), theirs.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    ASSERT_EQ(ours[b].d, theirs[b].d) << "block " << b;
    for (int j = 0; j < 32; ++j) ASSERT_EQ(ours[b].qs[j], theirs[b].qs[j]) << "block " << b << " value " << j;
  }
  // And ActRows produces the same rows.
  ActRows a;
  a.convert(x.data(), 1, n, n, DType::Q8_0);
  EXPECT_EQ(0, std::memcmp(a.row(0), theirs.data(), theirs.size() * sizeof(BlockQ8_0)));
}

TEST(GgmlOracle, QuantisedDotsMatchWithinFloatOrder) {
  REQUIRE_GGML();
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const int64_t rows = 9, cols = 2048 + 96;
    std::vector<float> wf(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(cols));
    for (float& v : wf) v = nd(rng);
    for (float& v : x) v = nd(rng);
    const size_t rb = dtype_row_bytes(t, cols);
    std::vector<uint8_t> w(rb * rows);
    for (int64_t o = 0; o < rows; ++o) quantize_row(t, wf.data() + o * cols, w.data() + o * rb, cols);
    ActRows a;
    a.convert(x.data(), 1, cols, cols, DType::Q8_0);
    const MatRef m{t, w.data(), rows, cols, rb};
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(isa_best())) continue;
      isa_force(isa);
      std::vector<float> y(static_cast<size_t>(rows));
      matmul(m, a, y.data(), rows, 0, rows);
      isa_force(isa_best());
      for (int64_t o = 0; o < rows; ++o) {
        float want = 0;
        (t == DType::Q4_0 ? ggml().dot_q4_0 : ggml().dot_q8_0)(static_cast<int>(cols), &want, 0, w.data() + o * rb, 0,
                                                               a.row(0), 0, 1);
        EXPECT_NEAR(y[o], want, 2e-5f * (1.0f + std::fabs(want)))
            << dtype_name(t) << " " << isa_name(isa) << " row " << o;
      }
    }
  }
}

}  // namespace
}  // namespace clover::kernels
