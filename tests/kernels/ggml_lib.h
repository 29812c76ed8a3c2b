// The prebuilt ggml v0.5.0 libraries of node-llama-cpp (npm test tooling), opened with dlopen for
// the bit-for-bit kernel tests. Handles stay open for the life of the test binary.
#pragma once
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace clover::kernels::testing {

struct GgmlLibs {
  void* base = nullptr;
  void* cpu = nullptr;
  std::string why;  // empty when both opened

  template <class F>
  F sym(void* lib, const char* name) const {
    return lib ? reinterpret_cast<F>(dlsym(lib, name)) : nullptr;
  }
};

// libggml-base and the ggml-cpu variant this CPU runs (what llama.cpp itself would pick).
inline const GgmlLibs& ggml_libs() {
  static const GgmlLibs libs = [] {
    GgmlLibs g;
    const char* src = std::getenv("CLOVER_SOURCE_DIR");
    const std::string dir =
        std::string(src ? src : CLOVER_SOURCE_DIR_DEFAULT) + "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/";
    g.base = dlopen((dir + "libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!g.base) {
      g.why = "ggml not installed (" + dir + ")";
      return g;
    }
    // CLOVER_GGML_VARIANT (e.g. haswell) loads another variant this CPU can run: how the tests
    // behave where llama.cpp would pick it.
    const char* forced = std::getenv("CLOVER_GGML_VARIANT");
    const char* variant = forced                                                                          ? forced
                          : __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16") ? "zen4"
                          : __builtin_cpu_supports("avx2")                                                ? "haswell"
                                                                                                          : "x64";
    g.cpu = dlopen((dir + "libggml-cpu-" + variant + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!g.cpu) {
      g.why = std::string("cannot load ggml-cpu: ") + dlerror();
      return g;
    }
    auto init = reinterpret_cast<void (*)()>(dlsym(g.cpu, "ggml_cpu_init"));
    if (init) init();
    return g;
  }();
  return libs;
}

// ggml's own matrix product y = W x, computed by the CPU library's graph code on one thread, as
// llama.cpp runs a dense product: W [rows][cols] of ggml type `w_type` (enum ggml_type) as stored,
// x [n_act][cols] floats; y [n_act][rows]. nullopt when the libraries do not export the graph API.
inline std::optional<std::vector<float>> ggml_mul_mat(int w_type, const void* w, size_t w_bytes, int64_t rows,
                                                      int64_t cols, const float* x, int64_t n_act) {
  struct InitParams {
    size_t mem_size;
    void* mem_buffer;
    bool no_alloc;
  };
  constexpr int kTypeF32 = 0;
  const GgmlLibs& g = ggml_libs();
  const auto init = g.sym<void* (*)(InitParams)>(g.base, "ggml_init");
  const auto free_ctx = g.sym<void (*)(void*)>(g.base, "ggml_free");
  const auto new_2d = g.sym<void* (*)(void*, int, int64_t, int64_t)>(g.base, "ggml_new_tensor_2d");
  const auto data = g.sym<void* (*)(const void*)>(g.base, "ggml_get_data");
  const auto mul_mat = g.sym<void* (*)(void*, void*, void*)>(g.base, "ggml_mul_mat");
  const auto new_graph = g.sym<void* (*)(void*)>(g.base, "ggml_new_graph");
  const auto expand = g.sym<void (*)(void*, void*)>(g.base, "ggml_build_forward_expand");
  const auto compute = g.sym<int (*)(void*, void*, int)>(g.cpu, "ggml_graph_compute_with_ctx");
  if (!init || !free_ctx || !new_2d || !data || !mul_mat || !new_graph || !expand || !compute) return std::nullopt;
  void* ctx = init(InitParams{size_t{16} << 20, nullptr, false});
  void* tw = new_2d(ctx, w_type, cols, rows);
  void* ta = new_2d(ctx, kTypeF32, cols, n_act);
  std::memcpy(data(tw), w, w_bytes);
  std::memcpy(data(ta), x, static_cast<size_t>(n_act * cols) * sizeof(float));
  void* ty = mul_mat(ctx, tw, ta);
  void* graph = new_graph(ctx);
  expand(graph, ty);
  std::vector<float> y;
  if (compute(ctx, graph, 1) == 0) {
    const auto* out = static_cast<const float*>(data(ty));
    y.assign(out, out + n_act * rows);
  }
  free_ctx(ctx);
  return y;  // empty when the graph failed
}

}  // namespace clover::kernels::testing
