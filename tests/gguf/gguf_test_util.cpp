#include "gguf/gguf_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace clover::gguf::test {

ScratchDir::ScratchDir() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/clover-gguf-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool values_equal(const Value& a, const Value& b) {
  if (a.type != b.type || a.v.index() != b.v.index()) return false;
  switch (a.v.index()) {
    case 0: return std::get<0>(a.v) == std::get<0>(b.v);
    case 1: return std::get<1>(a.v) == std::get<1>(b.v);
    case 2: return std::get<2>(a.v) == std::get<2>(b.v);
    case 3: return std::get<3>(a.v) == std::get<3>(b.v);
    case 4: return std::get<4>(a.v) == std::get<4>(b.v);
    default: break;
  }
  if (a.elem_type != b.elem_type) return false;
  const auto& x = std::get<std::vector<Value>>(a.v);
  const auto& y = std::get<std::vector<Value>>(b.v);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!values_equal(x[i], y[i])) return false;
  }
  return true;
}

RawGguf& RawGguf::bytes(const void* p, size_t n) {
  const auto* c = static_cast<const uint8_t*>(p);
  b.insert(b.end(), c, c + n);
  return *this;
}

RawGguf& RawGguf::header(uint64_t n_tensors, uint64_t n_kv, uint32_t version) {
  bytes("GGUF", 4);
  u32(version);
  u64(n_tensors);
  return u64(n_kv);
}

RawGguf& RawGguf::kv_u32(const std::string& key, uint32_t x) {
  str(key);
  u32(static_cast<uint32_t>(ValueType::U32));
  return u32(x);
}

RawGguf& RawGguf::kv_str(const std::string& key, const std::string& s) {
  str(key);
  u32(static_cast<uint32_t>(ValueType::String));
  return str(s);
}

RawGguf& RawGguf::tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                         uint64_t offset) {
  str(name);
  u32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) u64(d);
  u32(type);
  return u64(offset);
}

RawGguf& RawGguf::pad(uint64_t alignment) {
  while (b.size() % alignment) b.push_back(0);
  return *this;
}

RawGguf& RawGguf::zeros(size_t n) {
  b.insert(b.end(), n, 0);
  return *this;
}

}  // namespace clover::gguf::test
