// Test helpers: synthetic model files, and copies of them with one thing changed.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "gguf/gguf.h"
#include "synth/synth.h"

namespace clover::testing {

// A temporary directory removed at destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/clover-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// n token ids below `vocab`, reproducible from `seed`.
inline std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// The mapping of this process that holds p, from /proc/self/maps: its address range ("LO-HI") and
// its permissions ("r--p", "rw-p"); both empty when none holds p (the tests of the --no-mmap
// copy's protection).
struct Mapping {
  std::string range, perms;
  std::string access() const { return perms.substr(0, 2); }  // "r-" (read-only) or "rw"
};
inline Mapping mapping_of(const void* p) {
  FILE* f = std::fopen("/proc/self/maps", "r");
  unsigned long lo = 0, hi = 0;
  char perms[8] = {};
  Mapping found;
  while (f && std::fscanf(f, "%lx-%lx %7s %*[^\n]", &lo, &hi, perms) == 3) {
    const auto x = reinterpret_cast<unsigned long>(p);
    if (x >= lo && x < hi) found = {std::to_string(lo) + "-" + std::to_string(hi), perms};
  }
  if (f) std::fclose(f);
  return found;
}

// Whether two float vectors hold the same bits (logits compared for bitwise equality).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline std::string write_synth(const TempDir& dir, const std::string& name, synth::SynthConfig cfg) {
  const std::string p = dir.file(name);
  synth::write_model(cfg, p);
  return p;
}

// Rewrites `src` into `dst`: edit_kv may change or drop metadata (return false to drop);
// edit_tensor may rename/reshape/drop tensors (return false to drop). Data bytes are copied.
struct FileEdit {
  std::function<bool(std::string& key, gguf::Value& v)> kv = {};
  std::function<bool(std::string& name, std::vector<int64_t>& dims)> tensor = {};
  std::vector<std::pair<std::string, gguf::Value>> add_kv = {};
  struct Extra {
    std::string name;
    std::vector<int64_t> dims;
  };
  std::vector<Extra> add_f32_tensors = {};
};

inline void rewrite(const std::string& src, const std::string& dst, const FileEdit& e) {
  auto r = gguf::Reader::open(src);
  gguf::Writer w(dst);
  for (auto [key, v] : r->metadata())
    if (!e.kv || e.kv(key, v)) w.set(key, v);
  for (const auto& [k, v] : e.add_kv) w.set(k, v);
  struct Out {
    std::string name;
    const gguf::TensorInfo* t;
  };
  std::vector<Out> outs;
  for (const auto& t : r->tensors()) {
    std::string name = t.name;
    std::vector<int64_t> dims = t.dims;
    if (e.tensor && !e.tensor(name, dims)) continue;
    w.add_tensor(name, dims, t.type);
    outs.push_back({name, &t});
  }
  for (const auto& x : e.add_f32_tensors) w.add_tensor(x.name, x.dims, DType::F32);
  w.begin_data();
  for (const auto& o : outs) {
    const uint64_t need = w.tensor_bytes(o.name);
    std::vector<uint8_t> buf(need, 0);
    std::memcpy(buf.data(), o.t->data, std::min<uint64_t>(need, o.t->size));
    w.write_tensor_data(o.name, buf.data(), buf.size());
  }
  for (const auto& x : e.add_f32_tensors) {
    std::vector<uint8_t> buf(w.tensor_bytes(x.name), 0);
    w.write_tensor_data(x.name, buf.data(), buf.size());
  }
  w.finish();
}

}  // namespace clover::testing
