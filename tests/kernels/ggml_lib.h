// The prebuilt ggml v0.5.0 libraries of node-llama-cpp (npm test tooling), opened with dlopen for
// the bit-for-bit kernel tests. Handles stay open for the life of the test binary.
#pragma once
#include <dlfcn.h>

#include <cstdlib>
#include <string>

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

}  // namespace clover::kernels::testing
