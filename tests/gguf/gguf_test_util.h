// Helpers for the GGUF tests: scratch files, a raw byte-level GGUF builder (to craft files the
// Writer refuses to write) and a deep Value comparison.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace clover::gguf::test {

// A fresh directory under $TMPDIR (or /tmp), removed with its files on destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> read_bytes(const std::string& path);
bool file_exists(const std::string& path);

bool values_equal(const Value& a, const Value& b);

// Appends GGUF fields in little-endian order, with no checks at all.
struct RawGguf {
  std::vector<uint8_t> b;

  RawGguf& bytes(const void* p, size_t n);
  RawGguf& u8(uint8_t x) { return bytes(&x, 1); }
  RawGguf& u32(uint32_t x) { return bytes(&x, 4); }
  RawGguf& u64(uint64_t x) { return bytes(&x, 8); }
  RawGguf& f32(float x) { return bytes(&x, 4); }
  RawGguf& str(const std::string& s) { u64(s.size()); return bytes(s.data(), s.size()); }
  RawGguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3);
  // key + type + u32 value
  RawGguf& kv_u32(const std::string& key, uint32_t x);
  RawGguf& kv_str(const std::string& key, const std::string& s);
  RawGguf& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset);
  RawGguf& pad(uint64_t alignment);
  RawGguf& zeros(size_t n);
};

}  // namespace clover::gguf::test
