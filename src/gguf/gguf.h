// GGUF files (versions 2 and 3): a strict, zero-copy reader over mmap and a streaming writer.
//
// The reader validates everything before anything is used: magic, version, every length and count
// against the file size, key and value types, tensor dims against the block size, data offsets and
// sizes (overflow-checked), alignment and overlaps. Every problem is a GgufError whose message names
// the file and the key or tensor at fault.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/dtype.h"

namespace clover::gguf {

struct GgufError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// GGUF metadata value types, numbered as in the format.
enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Arrays hold elements of a single type (arrays of arrays are allowed by the
// format; they are kept as nested Values).
struct Value {
  ValueType type = ValueType::U32;
  ValueType elem_type = ValueType::U8;  // for arrays
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<Value>> v;

  static Value u32(uint32_t x);
  static Value i32(int32_t x);
  static Value u64(uint64_t x);
  static Value f32(float x);
  static Value boolean(bool x);
  static Value str(std::string s);
  static Value array(ValueType elem, std::vector<Value> items);
  static Value str_array(const std::vector<std::string>& items);
  static Value i32_array(const std::vector<int32_t>& items);
  static Value f32_array(const std::vector<float>& items);
  static Value bool_array(const std::vector<bool>& items);
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ne0 first (ne0 is contiguous)
  DType type = DType::F32;
  uint64_t offset = 0;        // relative to the data section
  uint64_t size = 0;          // bytes
  const uint8_t* data = nullptr;  // into the mapping (reader only)
  int64_t n_elements() const;
};

// How a Reader holds the file's bytes.
struct OpenOptions {
  // true: a read-only shared mapping of the file (pages come in as they are used). false
  // (--no-mmap): the file is validated on a mapping, then read into anonymous memory (transparent
  // huge pages where the kernel allows them, readable and writable), with O_DIRECT where most of
  // the file is not in the page cache and the file system allows it, else through the page cache,
  // released behind the read (POSIX_FADV_DONTNEED) so the file is not held twice; the file may
  // then change on disk.
  bool mmap = true;
  // Called as the file is read (mmap = false): bytes done of the file's size.
  std::function<void(uint64_t done, uint64_t total)> on_read;
};

class Reader {
 public:
  // Maps and validates the file; throws GgufError.
  static std::unique_ptr<Reader> open(const std::string& path);
  static std::unique_ptr<Reader> open(const std::string& path, const OpenOptions& opts);
  ~Reader();
  Reader(const Reader&) = delete;  // owns the mapping: held by pointer only
  Reader& operator=(const Reader&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  uint64_t file_size() const { return size_; }
  // The file's size now (fstat of the mapped descriptor; file_size() if fstat fails). Below
  // file_size() when the file was truncated after it was mapped: reading a page past the new end
  // raises SIGBUS. With OpenOptions::mmap false, always file_size(): the bytes are in memory.
  uint64_t size_on_disk() const;
  // Whether the bytes are the file's mapping (OpenOptions::mmap), not a copy in anonymous memory.
  bool mapped() const { return mapped_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: throw GgufError naming the key when it is missing (for the required forms) or
  // when its type is not exactly the one asked for.
  uint32_t get_u32(std::string_view key) const;
  std::optional<uint32_t> get_u32_opt(std::string_view key) const;
  float get_f32(std::string_view key) const;
  std::optional<float> get_f32_opt(std::string_view key) const;
  std::string get_str(std::string_view key) const;
  std::optional<std::string> get_str_opt(std::string_view key) const;
  std::optional<bool> get_bool_opt(std::string_view key) const;
  // Arrays: element types are checked (integer arrays accept I32, U32 or Bool elements, as
  // llama.cpp does).
  std::vector<std::string> get_str_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(std::string_view name) const;
  // Asks the kernel to start reading a tensor's pages (MADV_WILLNEED); never required.
  void prefetch(const TensorInfo& t) const;
  // The bytes [p, p + n) of the in-memory copy (OpenOptions::mmap false), for the owner of the
  // weights to rewrite them in place (a backend's layout: kernels/repack.h). Throws GgufError on a
  // mapped file (shared with other processes and the page cache: never written) or a range outside
  // the copy.
  uint8_t* writable(const void* p, size_t n) const;
  // Whether the in-memory copy was read with O_DIRECT (false for a mapped file).
  bool read_direct() const { return direct_read_; }

 private:
  Reader() = default;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t size_ = 0;
  const uint8_t* base_ = nullptr;
  int fd_ = -1;
  bool mapped_ = true;
  bool direct_read_ = false;
  void* region_ = nullptr;  // what to munmap: the file's mapping, or the anonymous copy (aligned inside)
  uint64_t region_size_ = 0;
  void read_into_memory(const OpenOptions& opts);
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend class ReaderParser;
};

// One entry of a file's tensor table, for encode_header().
struct TableEntry {
  const std::string* name;
  const std::vector<int64_t>* dims;
  DType type;
  uint64_t offset;  // relative to the data section
};

// The bytes of a GGUF header: magic, version, counts, metadata and tensor table, without the
// padding up to the data section. The Writer uses it; so do tools that place tensor data
// themselves (clover patch copies it with copy_file_range).
std::vector<uint8_t> encode_header(uint32_t version, const std::vector<std::pair<std::string, Value>>& metadata,
                                   const std::vector<TableEntry>& tensors);

// Streaming writer: declare metadata and tensor infos first, then write tensor data in the same
// order, one tensor at a time, so a file far larger than memory can be written with bounded memory.
// The file is written to `path + ".tmp"` and renamed to `path` only by finish(); destroying an
// unfinished Writer removes the temporary file.
class Writer {
 public:
  explicit Writer(std::string path, uint32_t alignment = 32);
  ~Writer();

  void set(std::string key, Value v);  // replaces an existing key, keeps first-set order
  void add_tensor(std::string name, std::vector<int64_t> dims, DType type);  // validates dims
  // GGUF version to write, 3 (the default) or 2; the layouts are identical. Before begin_data.
  void set_version(uint32_t version);

  // Writes header, metadata and tensor table. Called automatically by the first write_tensor_data.
  void begin_data();
  // Data of the next declared tensor (exactly its size in bytes); may be called in pieces with
  // append_tensor_data for large tensors.
  void write_tensor_data(std::string_view name, const void* data, size_t bytes);
  void append_tensor_data(const void* data, size_t bytes);
  // Checks that every tensor got all its bytes, flushes, fsyncs and renames into place.
  void finish();

  uint64_t tensor_bytes(std::string_view name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace clover::gguf
