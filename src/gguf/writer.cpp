// Streaming GGUF writer: the header, metadata and tensor table are written once all tensors are
// declared; tensor data then streams through a fixed 4 MiB buffer, so memory stays bounded however
// large the file. The file only appears under its name when finish() renames the .tmp into place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "gguf/format.h"

namespace clover::gguf {

using namespace detail;

namespace {

constexpr size_t kBufferBytes = size_t{4} << 20;

// Checks that a Value's variant holds what its type says and that integers fit their width, so
// that what is written is what a reader will read back.
void validate_value(const Value& v, const std::string& where, int depth = 0) {
  auto bad = [&](const std::string& why) { throw GgufError(where + ": " + why); };
  auto holds_u = [&](uint64_t max) {
    if (!std::holds_alternative<uint64_t>(v.v)) bad(std::string(value_type_name(v.type)) + " value does not hold an unsigned integer");
    if (std::get<uint64_t>(v.v) > max) bad("value " + std::to_string(std::get<uint64_t>(v.v)) + " out of range for " + std::string(value_type_name(v.type)));
  };
  auto holds_i = [&](int64_t lo, int64_t hi) {
    if (!std::holds_alternative<int64_t>(v.v)) bad(std::string(value_type_name(v.type)) + " value does not hold a signed integer");
    const int64_t x = std::get<int64_t>(v.v);
    if (x < lo || x > hi) bad("value " + std::to_string(x) + " out of range for " + std::string(value_type_name(v.type)));
  };
  switch (v.type) {
    case ValueType::U8: holds_u(UINT8_MAX); break;
    case ValueType::U16: holds_u(UINT16_MAX); break;
    case ValueType::U32: holds_u(UINT32_MAX); break;
    case ValueType::U64: holds_u(UINT64_MAX); break;
    case ValueType::I8: holds_i(INT8_MIN, INT8_MAX); break;
    case ValueType::I16: holds_i(INT16_MIN, INT16_MAX); break;
    case ValueType::I32: holds_i(INT32_MIN, INT32_MAX); break;
    case ValueType::I64: holds_i(INT64_MIN, INT64_MAX); break;
    case ValueType::F32:
    case ValueType::F64:
      if (!std::holds_alternative<double>(v.v)) bad("float value does not hold a double");
      break;
    case ValueType::Bool:
      if (!std::holds_alternative<bool>(v.v)) bad("bool value does not hold a bool");
      break;
    case ValueType::String:
      if (!std::holds_alternative<std::string>(v.v)) bad("string value does not hold a string");
      break;
    case ValueType::Array: {
      if (!std::holds_alternative<std::vector<Value>>(v.v)) bad("array value does not hold a vector");
      if (!is_valid_value_type(static_cast<uint32_t>(v.elem_type))) bad("array has an invalid element type");
      if (depth >= kMaxArrayDepth) bad("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
      for (const Value& item : std::get<std::vector<Value>>(v.v)) {
        if (item.type != v.elem_type) {
          bad("array of " + std::string(value_type_name(v.elem_type)) + " holds a " +
              std::string(value_type_name(item.type)) + " element");
        }
        validate_value(item, where, depth + 1);
      }
      break;
    }
    default:
      bad("invalid value type " + std::to_string(static_cast<uint32_t>(v.type)));
  }
}

}  // namespace

namespace {
// Little-endian encoding into a byte vector (used for the header and tables only).
struct Encoder {
  std::vector<uint8_t> out;
  void put_bytes(const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, p, n);
  }
  template <typename T>
  void put(T x) {
    put_bytes(&x, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    put_bytes(s.data(), s.size());
  }
  void put_value(const Value& v) {
    switch (v.type) {
      case ValueType::U8: put<uint8_t>(static_cast<uint8_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::U16: put<uint16_t>(static_cast<uint16_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::U32: put<uint32_t>(static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::U64: put<uint64_t>(std::get<uint64_t>(v.v)); break;
      case ValueType::I8: put<int8_t>(static_cast<int8_t>(std::get<int64_t>(v.v))); break;
      case ValueType::I16: put<int16_t>(static_cast<int16_t>(std::get<int64_t>(v.v))); break;
      case ValueType::I32: put<int32_t>(static_cast<int32_t>(std::get<int64_t>(v.v))); break;
      case ValueType::I64: put<int64_t>(std::get<int64_t>(v.v)); break;
      case ValueType::F32: put<float>(static_cast<float>(std::get<double>(v.v))); break;
      case ValueType::F64: put<double>(std::get<double>(v.v)); break;
      case ValueType::Bool: put<uint8_t>(std::get<bool>(v.v) ? 1 : 0); break;
      case ValueType::String: put_string(std::get<std::string>(v.v)); break;
      case ValueType::Array: {
        const auto& items = std::get<std::vector<Value>>(v.v);
        put<uint32_t>(static_cast<uint32_t>(v.elem_type));
        put<uint64_t>(items.size());
        for (const Value& item : items) put_value(item);
        break;
      }
    }
  }
};

}  // namespace

std::vector<uint8_t> encode_header(uint32_t version, const std::vector<std::pair<std::string, Value>>& metadata,
                                   const std::vector<TableEntry>& tensors) {
  Encoder e;
  e.put_bytes(kMagic, sizeof kMagic);
  e.put<uint32_t>(version);
  e.put<uint64_t>(tensors.size());
  e.put<uint64_t>(metadata.size());
  for (const auto& [k, v] : metadata) {
    e.put_string(k);
    e.put<uint32_t>(static_cast<uint32_t>(v.type));
    e.put_value(v);
  }
  for (const auto& t : tensors) {
    e.put_string(*t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.dims->size()));
    for (int64_t d : *t.dims) e.put<uint64_t>(static_cast<uint64_t>(d));
    e.put<uint32_t>(static_cast<uint32_t>(t.type));
    e.put<uint64_t>(t.offset);
  }
  return std::move(e.out);
}

struct Writer::Impl {
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    DType type;
    uint64_t size;
    uint64_t offset;  // in the data section
  };

  std::string path, tmp;
  uint32_t alignment;
  uint32_t version = 3;
  std::vector<std::pair<std::string, Value>> kv;
  std::vector<Tensor> tensors;
  std::unordered_map<std::string, size_t> index;
  uint64_t data_bytes = 0;  // data section size, tensors padded to the alignment

  int fd = -1;
  bool began = false, finished = false, failed = false;
  uint64_t pos = 0;         // file bytes emitted (buffered or written)
  uint64_t data_start = 0;  // file offset of the data section
  size_t next = 0;          // next tensor to receive data
  size_t cur = SIZE_MAX;    // tensor receiving data now
  uint64_t cur_written = 0;
  std::vector<uint8_t> buf;

  [[noreturn]] void fail(const std::string& what) const { throw GgufError(path + ": " + what); }
  [[noreturn]] void fail_io(const std::string& what) {
    failed = true;
    fail(what + ": " + std::strerror(errno));
  }
  void check_usable() const {
    if (finished) fail("writer already finished");
    if (failed) fail("writer failed earlier; the file is not written");
  }

  void write_all(const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail_io("write to " + tmp + " failed");
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  void flush() {
    write_all(buf.data(), buf.size());
    buf.clear();
  }
  void emit(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    pos += n;
    if (buf.size() + n <= kBufferBytes) {
      buf.insert(buf.end(), p, p + n);
      return;
    }
    flush();
    if (n >= kBufferBytes) {
      write_all(p, n);  // large pieces skip the copy
    } else {
      buf.insert(buf.end(), p, p + n);
    }
  }
  void pad_to(uint64_t target) {
    static const uint8_t zeros[256] = {};
    while (pos < target) emit(zeros, static_cast<size_t>(std::min<uint64_t>(target - pos, sizeof zeros)));
  }
  void check_current_complete() const {
    if (cur != SIZE_MAX && cur_written != tensors[cur].size) {
      fail("tensor '" + tensors[cur].name + "' got " + std::to_string(cur_written) + " of its " +
           std::to_string(tensors[cur].size) + " bytes");
    }
  }
};

Writer::Writer(std::string path, uint32_t alignment) : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.path = std::move(path);
  w.tmp = w.path + ".tmp";
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    w.fail("alignment " + std::to_string(alignment) + " is not a power of two");
  }
  w.alignment = alignment;
  w.fd = ::open(w.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd < 0) w.fail_io("cannot create " + w.tmp);
  w.buf.reserve(kBufferBytes);
}

Writer::~Writer() {
  if (!impl_) return;
  if (impl_->fd >= 0) ::close(impl_->fd);
  if (!impl_->finished) ::unlink(impl_->tmp.c_str());
}

void Writer::set_version(uint32_t version) {
  Impl& w = *impl_;
  w.check_usable();
  if (w.began) w.fail("set_version after begin_data");
  if (version != 2 && version != 3) w.fail("cannot write GGUF version " + std::to_string(version));
  w.version = version;
}

void Writer::set(std::string key, Value v) {
  Impl& w = *impl_;
  w.check_usable();
  if (w.began) w.fail("key '" + key + "' set after begin_data");
  if (key.empty()) w.fail("empty metadata key");
  validate_value(v, w.path + ": key '" + key + "'");
  for (auto& [k, old] : w.kv) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  w.kv.emplace_back(std::move(key), std::move(v));
}

void Writer::add_tensor(std::string name, std::vector<int64_t> dims, DType type) {
  Impl& w = *impl_;
  w.check_usable();
  const std::string what = "tensor '" + name + "'";
  if (w.began) w.fail(what + " added after begin_data");
  if (name.empty()) w.fail("empty tensor name");
  if (w.index.count(name)) w.fail("duplicate " + what);
  if (!dtype_supported(static_cast<uint32_t>(type))) {
    w.fail(what + " has unsupported type " + ggml_type_label(static_cast<uint32_t>(type)));
  }
  uint64_t size = 0;
  std::string why;
  if (!tensor_shape_bytes(dims, type, &size, &why)) w.fail(what + " " + why);
  uint64_t end = 0;
  if (!add_ok(w.data_bytes, size, &end) || end > UINT64_MAX - w.alignment) w.fail("data section too large at " + what);
  w.index.emplace(name, w.tensors.size());
  w.tensors.push_back({std::move(name), std::move(dims), type, size, w.data_bytes});
  w.data_bytes = align_up(end, w.alignment);
}

uint64_t Writer::tensor_bytes(std::string_view name) const {
  auto it = impl_->index.find(std::string(name));
  if (it == impl_->index.end()) impl_->fail("unknown tensor '" + std::string(name) + "'");
  return impl_->tensors[it->second].size;
}

void Writer::begin_data() {
  Impl& w = *impl_;
  w.check_usable();
  if (w.began) return;
  // A non-default alignment must be recorded in the file; a key set by hand must agree with it.
  const Value* align_kv = nullptr;
  for (const auto& [k, v] : w.kv) {
    if (k == kAlignmentKey) align_kv = &v;
  }
  if (align_kv) {
    if (align_kv->type != ValueType::U32 || std::get<uint64_t>(align_kv->v) != w.alignment) {
      w.fail(std::string("key '") + kAlignmentKey + "' disagrees with the writer's alignment " + std::to_string(w.alignment));
    }
  } else if (w.alignment != kDefaultAlignment) {
    w.kv.emplace_back(kAlignmentKey, Value::u32(w.alignment));
  }

  std::vector<TableEntry> table;
  table.reserve(w.tensors.size());
  for (const auto& t : w.tensors) table.push_back({&t.name, &t.dims, t.type, t.offset});
  const std::vector<uint8_t> header = encode_header(w.version, w.kv, table);
  w.began = true;
  w.emit(header.data(), header.size());
  w.data_start = align_up(w.pos, w.alignment);
  w.pad_to(w.data_start);
}

void Writer::write_tensor_data(std::string_view name, const void* data, size_t bytes) {
  Impl& w = *impl_;
  w.check_usable();
  if (!w.began) begin_data();
  w.check_current_complete();
  if (w.next >= w.tensors.size()) w.fail("data for tensor '" + std::string(name) + "' after the last declared tensor");
  const Impl::Tensor& t = w.tensors[w.next];
  if (t.name != name) {
    w.fail("data for tensor '" + std::string(name) + "' given where '" + t.name + "' is next (declaration order)");
  }
  if (bytes > t.size) {
    w.fail("tensor '" + t.name + "' given " + std::to_string(bytes) + " bytes, its size is " + std::to_string(t.size));
  }
  w.cur = w.next++;
  w.cur_written = 0;
  w.pad_to(w.data_start + t.offset);
  append_tensor_data(data, bytes);
}

void Writer::append_tensor_data(const void* data, size_t bytes) {
  Impl& w = *impl_;
  w.check_usable();
  if (w.cur == SIZE_MAX) w.fail("append_tensor_data before write_tensor_data");
  const Impl::Tensor& t = w.tensors[w.cur];
  if (bytes > t.size - w.cur_written) {
    w.fail("tensor '" + t.name + "' given " + std::to_string(w.cur_written + bytes) + " bytes, its size is " +
           std::to_string(t.size));
  }
  w.emit(data, bytes);
  w.cur_written += bytes;
}

void Writer::finish() {
  Impl& w = *impl_;
  w.check_usable();
  if (!w.began) begin_data();
  w.check_current_complete();
  if (w.next < w.tensors.size()) {
    w.fail("finish with " + std::to_string(w.tensors.size() - w.next) + " tensors never written, first '" +
           w.tensors[w.next].name + "'");
  }
  w.pad_to(w.data_start + w.data_bytes);
  w.flush();
  if (::fsync(w.fd) != 0) w.fail_io("fsync of " + w.tmp + " failed");
  const int fd = w.fd;
  w.fd = -1;
  if (::close(fd) != 0) w.fail_io("close of " + w.tmp + " failed");
  if (::rename(w.tmp.c_str(), w.path.c_str()) != 0) w.fail_io("rename of " + w.tmp + " failed");
  w.finished = true;
  // Make the rename itself durable.
  const size_t slash = w.path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : w.path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace clover::gguf
