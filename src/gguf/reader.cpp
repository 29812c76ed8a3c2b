// GGUF reader: maps the file read-only and validates all of it before handing out anything.
//
// Every length and count read from the file is checked against the bytes that remain before it is
// used, and before anything is allocated from it, so a corrupt or hostile file ends in a GgufError,
// never in a crash or a huge allocation.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_set>

#include "gguf/format.h"
#include "runtime/huge_pages.h"
#include "runtime/page_cache.h"

namespace clover::gguf {

using namespace detail;

namespace {

// Metadata is kept as Values (about 48 bytes each, plus string bytes). The format's counts are only
// bounded by the file size, so a corrupt count inside a 20 GB file could still ask for far more
// memory than the file holds; this caps what the metadata may cost in memory. A real tokenizer
// (250k tokens and merges) uses well under 100 MiB.
constexpr uint64_t kMaxMetadataMemory = uint64_t{512} << 20;
// The header and tables are read once, front to back; ask the kernel for them up front.
constexpr uint64_t kHeaderPrefetch = uint64_t{16} << 20;

}  // namespace

// Parses the mapped bytes into a Reader; the friend of Reader that fills its private fields.
class ReaderParser {
 public:
  explicit ReaderParser(Reader& r) : r_(r), base_(r.base_), size_(r.size_) {}

  void parse() {
    parse_header();
    for (uint64_t i = 0; i < n_kv_; ++i) parse_kv(i);
    parse_alignment();
    for (uint64_t i = 0; i < n_tensors_; ++i) parse_tensor_info(i);
    place_data();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw GgufError(r_.path_ + ": " + what); }

  uint64_t remaining() const { return size_ - pos_; }

  // Bounds-checked read of n bytes. `ctx` and `item` name what is read (e.g. "key 'x'", "value");
  // they are only joined into a message on failure, so parsing a 250k-entry vocabulary builds no
  // strings it does not keep.
  const uint8_t* take(uint64_t n, const std::string& ctx, const char* item) {
    if (n > remaining()) {
      fail("truncated while reading " + ctx + (ctx.empty() ? "" : " ") + item + " at offset " + std::to_string(pos_) +
           " (needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left)");
    }
    const uint8_t* p = base_ + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T read(const std::string& ctx, const char* item) {
    T x;
    std::memcpy(&x, take(sizeof(T), ctx, item), sizeof(T));  // GGUF is little-endian, as are our targets
    return x;
  }
  void read_string_into(std::string& out, const std::string& ctx, const char* item) {
    const uint64_t len = read<uint64_t>(ctx, item);
    if (len > remaining()) {
      fail("truncated: " + ctx + " " + item + " claims " + std::to_string(len) + " bytes, only " +
           std::to_string(remaining()) + " left");
    }
    charge(len, ctx);
    const uint8_t* p = take(len, ctx, item);
    out.assign(reinterpret_cast<const char*>(p), len);
  }
  std::string read_string(const std::string& ctx, const char* item) {
    std::string s;
    read_string_into(s, ctx, item);
    return s;
  }
  void charge(uint64_t bytes, const std::string& what) {
    memory_ += bytes;
    if (memory_ > kMaxMetadataMemory) {
      fail("metadata too large at " + what + " (over " + std::to_string(kMaxMetadataMemory >> 20) + " MiB in memory)");
    }
  }

  void parse_header() {
    const uint8_t* magic = take(4, "", "magic");
    if (std::memcmp(magic, kMagic, 4) != 0) {
      char shown[5] = {};
      for (int i = 0; i < 4; ++i) shown[i] = (magic[i] >= 32 && magic[i] < 127) ? char(magic[i]) : '?';
      fail(std::string("not a GGUF file (magic \"") + shown + "\", expected \"GGUF\")");
    }
    const uint32_t version = read<uint32_t>("", "version");
    if (version == 1) fail("GGUF version 1 is not supported (only versions 2 and 3); re-convert the model");
    if (version == (2u << 24) || version == (3u << 24)) {
      fail("big-endian GGUF files are not supported");
    }
    if (version != 2 && version != 3) {
      fail("unsupported GGUF version " + std::to_string(version) + " (only versions 2 and 3)");
    }
    r_.version_ = version;
    n_tensors_ = read<uint64_t>("", "tensor count");
    n_kv_ = read<uint64_t>("", "metadata count");
    // Each kv takes at least 13 bytes (key length, type, one-byte value) and each tensor info at
    // least 32 (name length, n_dims, one dim, type, offset).
    const uint64_t kv_min = 8 + 4 + 1, ti_min = 8 + 4 + 8 + 4 + 8;
    uint64_t need_kv = 0, need_ti = 0, need = 0;
    if (!mul_ok(n_kv_, kv_min, &need_kv) || !mul_ok(n_tensors_, ti_min, &need_ti) ||
        !add_ok(need_kv, need_ti, &need) || need > remaining()) {
      fail("implausible counts: " + std::to_string(n_kv_) + " metadata entries and " +
           std::to_string(n_tensors_) + " tensors cannot fit in " + std::to_string(size_) + " bytes");
    }
    r_.kv_.reserve(n_kv_);
    r_.tensors_.reserve(n_tensors_);
  }

  ValueType read_value_type(const std::string& what, const char* item) {
    const uint32_t t = read<uint32_t>(what, item);
    if (!is_valid_value_type(t)) fail(what + " has invalid " + item + " " + std::to_string(t));
    return static_cast<ValueType>(t);
  }

  // Fills v in place (arrays of 250k strings are common: no temporaries, no moves).
  void read_value(Value& v, ValueType type, const std::string& what, int depth) {
    charge(sizeof(Value), what);
    v.type = type;
    switch (type) {
      case ValueType::U8: v.v = uint64_t{read<uint8_t>(what, "value")}; break;
      case ValueType::I8: v.v = int64_t{read<int8_t>(what, "value")}; break;
      case ValueType::U16: v.v = uint64_t{read<uint16_t>(what, "value")}; break;
      case ValueType::I16: v.v = int64_t{read<int16_t>(what, "value")}; break;
      case ValueType::U32: v.v = uint64_t{read<uint32_t>(what, "value")}; break;
      case ValueType::I32: v.v = int64_t{read<int32_t>(what, "value")}; break;
      case ValueType::U64: v.v = read<uint64_t>(what, "value"); break;
      case ValueType::I64: v.v = read<int64_t>(what, "value"); break;
      case ValueType::F32: v.v = double{read<float>(what, "value")}; break;
      case ValueType::F64: v.v = read<double>(what, "value"); break;
      case ValueType::Bool: {
        const uint8_t b = read<uint8_t>(what, "value");
        if (b > 1) fail(what + " is a bool with byte value " + std::to_string(b) + " (must be 0 or 1)");
        v.v = b != 0;
        break;
      }
      case ValueType::String: read_string_into(v.v.emplace<std::string>(), what, "string"); break;
      case ValueType::Array: {
        if (depth >= kMaxArrayDepth) fail(what + " nests arrays deeper than " + std::to_string(kMaxArrayDepth));
        v.elem_type = read_value_type(what, "array element type");
        const uint64_t n = read<uint64_t>(what, "array length");
        uint64_t need = 0;
        if (!mul_ok(n, min_encoded_size(v.elem_type), &need) || need > remaining()) {
          fail(what + " claims " + std::to_string(n) + " " + std::string(value_type_name(v.elem_type)) +
               " elements, which cannot fit in the " + std::to_string(remaining()) + " bytes left");
        }
        uint64_t cost = 0;
        if (!mul_ok(n, sizeof(Value), &cost) || memory_ + cost > kMaxMetadataMemory) {
          fail("metadata too large at " + what + " (" + std::to_string(n) + " elements)");
        }
        // n is now known to fit both the file and the memory budget.
        auto& items = v.v.emplace<std::vector<Value>>(n);
        for (Value& item : items) read_value(item, v.elem_type, what, depth + 1);
        break;
      }
    }
  }

  void parse_kv(uint64_t i) {
    const std::string where = "metadata entry " + std::to_string(i);
    std::string key = read_string(where, "key");
    if (key.empty()) fail(where + " has an empty key");
    const std::string what = "key '" + key + "'";
    if (!keys_.insert(key).second) fail("duplicate " + what);
    const ValueType type = read_value_type(what, "value type");
    auto& kv = r_.kv_.emplace_back(std::move(key), Value{});
    read_value(kv.second, type, what, 0);
  }

  void parse_alignment() {
    const Value* a = r_.find(kAlignmentKey);
    if (!a) return;
    if (a->type != ValueType::U32) {
      fail(std::string("key '") + kAlignmentKey + "' has type " + std::string(value_type_name(a->type)) +
           ", expected u32");
    }
    const uint64_t x = std::get<uint64_t>(a->v);
    if (x == 0 || (x & (x - 1)) != 0) {
      fail(std::string("key '") + kAlignmentKey + "' = " + std::to_string(x) + " is not a power of two");
    }
    r_.alignment_ = x;
  }

  void parse_tensor_info(uint64_t i) {
    std::string name = read_string("tensor info " + std::to_string(i), "name");
    const std::string what = "tensor '" + name + "'";
    if (name.empty()) fail("tensor info " + std::to_string(i) + " has an empty name");
    if (r_.tensor_index_.count(name)) fail("duplicate " + what);
    const uint32_t n_dims = read<uint32_t>(what, "n_dims");
    if (n_dims == 0 || n_dims > kMaxDims) {
      fail(what + " has " + std::to_string(n_dims) + " dims (1 to " + std::to_string(kMaxDims) + " allowed)");
    }
    TensorInfo t;
    t.dims.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = read<uint64_t>(what, "dims");
      if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX)) {
        fail(what + " has dim " + std::to_string(d) + " = " + std::to_string(ne) + " (must be in 1..2^63-1)");
      }
      t.dims[d] = static_cast<int64_t>(ne);
    }
    const uint32_t ggml_type = read<uint32_t>(what, "type");
    if (!dtype_supported(ggml_type)) {
      fail(what + " has ggml type " + ggml_type_label(ggml_type) +
           ", which this engine does not support (supported: " + std::string(dtype_supported_list()) + ")");
    }
    t.type = static_cast<DType>(ggml_type);
    std::string why;
    if (!tensor_shape_bytes(t.dims, t.type, &t.size, &why)) fail(what + " " + why);
    t.offset = read<uint64_t>(what, "offset");
    charge(name.size() + sizeof(TensorInfo), what);
    t.name = std::move(name);
    r_.tensor_index_.emplace(t.name, r_.tensors_.size());
    r_.tensors_.push_back(std::move(t));
  }

  void place_data() {
    const uint64_t align = r_.alignment_;
    // pos_ <= size_ < 2^63, so this cannot overflow.
    const uint64_t data_offset = align_up(pos_, align);
    if (r_.tensors_.empty()) {
      r_.data_offset_ = std::min(data_offset, size_);  // a file without tensors may omit the padding
      return;
    }
    if (data_offset > size_) {
      fail("truncated: data section would start at offset " + std::to_string(data_offset) + " beyond the end (" +
           std::to_string(size_) + " bytes)");
    }
    r_.data_offset_ = data_offset;
    const uint64_t data_size = size_ - data_offset;
    for (TensorInfo& t : r_.tensors_) {
      const std::string what = "tensor '" + t.name + "'";
      if (t.offset % align != 0) {
        fail(what + " has offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
             std::to_string(align));
      }
      if (t.offset > data_size || t.size > data_size - t.offset) {
        fail(what + " data [" + std::to_string(t.offset) + ", +" + std::to_string(t.size) +
             ") runs past the end of the data section (" + std::to_string(data_size) + " bytes); file truncated?");
      }
      t.data = base_ + data_offset + t.offset;
    }
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(r_.tensors_.size());
    for (const TensorInfo& t : r_.tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& a = *by_offset[i - 1];
      const TensorInfo& b = *by_offset[i];
      if (a.offset + a.size > b.offset) {
        fail("tensor '" + a.name + "' [" + std::to_string(a.offset) + ", +" + std::to_string(a.size) +
             ") overlaps tensor '" + b.name + "' at " + std::to_string(b.offset));
      }
    }
  }

  Reader& r_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t memory_ = 0;
  std::unordered_set<std::string> keys_;
};

std::unique_ptr<Reader> Reader::open(const std::string& path) { return open(path, OpenOptions{}); }

std::unique_ptr<Reader> Reader::open(const std::string& path, const OpenOptions& opts) {
  std::unique_ptr<Reader> r(new Reader());
  r->path_ = path;
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; it is
  // refused just below as not a regular file (the flag changes nothing for regular files).
  r->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (r->fd_ < 0) throw GgufError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(r->fd_, &st) != 0) throw GgufError(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw GgufError(path + ": not a regular file");
  if (st.st_size < 8) {
    throw GgufError(path + ": truncated: " + std::to_string(st.st_size) + " bytes is too short for a GGUF header");
  }
  r->size_ = static_cast<uint64_t>(st.st_size);
  void* p = mmap(nullptr, r->size_, PROT_READ, MAP_SHARED, r->fd_, 0);
  if (p == MAP_FAILED) throw GgufError(path + ": mmap failed: " + std::strerror(errno));
  r->base_ = static_cast<const uint8_t*>(p);
  r->region_ = p;
  r->region_size_ = r->size_;
  madvise(p, std::min(r->size_, kHeaderPrefetch), MADV_WILLNEED);
  ReaderParser(*r).parse();
  if (!opts.mmap) r->read_into_memory(opts);
  return r;
}

// --no-mmap: the validated file read into anonymous memory, in steps. Where most of the file is
// not in the page cache, with O_DIRECT (the file system's blocks straight into the copy): no 20 GB
// of page cache to fill and then give back, which on this project's development VM (free page
// reporting) was followed by ~12 s of reads 2-4x slower (docs/loading.md). A cached file is copied
// from the cache, which is faster, each step's page cache dropped once it is copied (the file
// would otherwise be held twice); so is any file whose file system refuses O_DIRECT. The tensors'
// pointers move to the copy; the mapping and the descriptor are released. The copy stays readable
// and writable: left read-only, on that VM each of its pages read 5-6x slower the first time after
// the load (bench/load_warmup_probe.cpp), ~8 s of slow decoding.
namespace {

// A descriptor of the same file (checked by device and inode) opened with O_DIRECT, or -1.
int open_direct(const std::string& path, int fd) {
  const int d = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (d < 0) return -1;
  struct stat a {}, b {};
  if (fstat(fd, &a) != 0 || fstat(d, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
    ::close(d);
    return -1;
  }
  return d;
}

constexpr uint64_t kDirectAlign = 4096;  // offsets, lengths and the buffer: multiples of any block size

}  // namespace

void Reader::read_into_memory(const OpenOptions& opts) {
  constexpr uint64_t kStep = uint64_t{64} << 20;
  auto* copy = static_cast<uint8_t*>(runtime::map_huge(size_, /*noreserve=*/true));  // runtime/huge_pages.h
  if (!copy) throw GgufError(path_ + ": cannot allocate " + std::to_string(size_ >> 20) + " MiB to read the file into (--no-mmap): " + std::strerror(errno));
  // The copy is huge_page_round(size_) long, so a last direct read rounded up to kDirectAlign fits.
  int dfd = runtime::resident_fraction(base_, size_) < 0.5 ? open_direct(path_, fd_) : -1;
  if (dfd < 0) posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  // Back to reads through the page cache from here on (the file system refused a direct read).
  const auto stop_direct = [&] {
    ::close(dfd);
    dfd = -1;
  };
  uint64_t done = 0;
  while (done < size_) {
    const uint64_t n = std::min(kStep, size_ - done);
    uint64_t got = 0;
    while (got < n) {
      const bool direct = dfd >= 0;
      const uint64_t want = direct ? (n - got + kDirectAlign - 1) / kDirectAlign * kDirectAlign : n - got;
      const ssize_t k = pread(direct ? dfd : fd_, copy + done + got, want, static_cast<off_t>(done + got));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && direct && errno == EINVAL) {  // the file system takes no direct reads after all
        stop_direct();
        continue;
      }
      if (k <= 0) {
        const std::string why = k < 0 ? std::strerror(errno) : "the file ended early (truncated while it was read?)";
        if (dfd >= 0) ::close(dfd);
        runtime::unmap_huge(copy, size_);
        throw GgufError(path_ + ": reading the file into memory failed at byte " + std::to_string(done + got) + ": " + why);
      }
      got += std::min(static_cast<uint64_t>(k), n - got);  // (a guard: the end of the file ends a direct read)
      // A direct read stops short only at the end of the file, or on a block it could not take whole.
      if (direct && got < n && (done + got) % kDirectAlign != 0) stop_direct();
    }
    if (dfd < 0) posix_fadvise(fd_, static_cast<off_t>(done), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
    done += n;
    if (opts.on_read) opts.on_read(done, size_);
  }
  direct_read_ = dfd >= 0;  // direct to the end
  if (dfd >= 0) ::close(dfd);
  for (TensorInfo& t : tensors_) t.data = copy + (t.data - base_);
  munmap(region_, region_size_);
  ::close(fd_);
  fd_ = -1;
  base_ = copy;
  region_ = copy;
  region_size_ = runtime::huge_page_round(size_);
  mapped_ = false;
}

uint8_t* Reader::writable(const void* p, size_t n) const {
  if (mapped_) throw GgufError(path_ + ": the weights are the file's mapping, which is never written (load with --no-mmap)");
  const auto* b = static_cast<const uint8_t*>(p);
  if (b < base_ || n > size_ || static_cast<uint64_t>(b - base_) > size_ - n)
    throw GgufError(path_ + ": writable(): the range is outside the file's bytes");
  return const_cast<uint8_t*>(b);
}

Reader::~Reader() {
  if (region_) munmap(region_, region_size_);
  if (fd_ >= 0) ::close(fd_);
}

uint64_t Reader::size_on_disk() const {
  if (!mapped_) return size_;
  struct stat st {};
  if (fstat(fd_, &st) != 0) return size_;
  return static_cast<uint64_t>(st.st_size);
}

void Reader::prefetch(const TensorInfo& t) const {
  // madvise wants a page-aligned start.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t begin = static_cast<uint64_t>(t.data - base_) / page * page;
  const uint64_t end = static_cast<uint64_t>(t.data - base_) + t.size;
  madvise(const_cast<uint8_t*>(base_) + begin, end - begin, MADV_WILLNEED);
}

// ---- typed getters ----

const Value* Reader::find(std::string_view key) const {
  for (const auto& [k, v] : kv_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const TensorInfo* Reader::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

std::string type_label(const Value& v) {
  if (v.type != ValueType::Array) return std::string(value_type_name(v.type));
  return "array of " + std::string(value_type_name(v.elem_type));
}

}  // namespace

// Returns the value when it exists and has exactly the type asked for; nullptr when missing.
static const Value* typed(const Reader& r, std::string_view key, ValueType want,
                          std::initializer_list<ValueType> elems = {}) {
  const Value* v = r.find(key);
  if (!v) return nullptr;
  bool ok = v->type == want;
  if (ok && want == ValueType::Array) {
    ok = std::find(elems.begin(), elems.end(), v->elem_type) != elems.end();
  }
  if (!ok) {
    std::string expected(value_type_name(want));
    if (want == ValueType::Array) {
      expected = "array of ";
      for (size_t i = 0; i < elems.size(); ++i) {
        expected += (i ? "/" : "") + std::string(value_type_name(elems.begin()[i]));
      }
    }
    throw GgufError(r.path() + ": key '" + std::string(key) + "' has type " + type_label(*v) + ", expected " + expected);
  }
  return v;
}

static const Value& required(const Reader& r, const Value* v, std::string_view key) {
  if (!v) throw GgufError(r.path() + ": required key '" + std::string(key) + "' not found");
  return *v;
}

std::optional<uint32_t> Reader::get_u32_opt(std::string_view key) const {
  const Value* v = typed(*this, key, ValueType::U32);
  if (!v) return std::nullopt;
  return static_cast<uint32_t>(std::get<uint64_t>(v->v));
}
uint32_t Reader::get_u32(std::string_view key) const {
  return static_cast<uint32_t>(std::get<uint64_t>(required(*this, typed(*this, key, ValueType::U32), key).v));
}

std::optional<float> Reader::get_f32_opt(std::string_view key) const {
  const Value* v = typed(*this, key, ValueType::F32);
  if (!v) return std::nullopt;
  return static_cast<float>(std::get<double>(v->v));
}
float Reader::get_f32(std::string_view key) const {
  return static_cast<float>(std::get<double>(required(*this, typed(*this, key, ValueType::F32), key).v));
}

std::optional<std::string> Reader::get_str_opt(std::string_view key) const {
  const Value* v = typed(*this, key, ValueType::String);
  if (!v) return std::nullopt;
  return std::get<std::string>(v->v);
}
std::string Reader::get_str(std::string_view key) const {
  return std::get<std::string>(required(*this, typed(*this, key, ValueType::String), key).v);
}

std::optional<bool> Reader::get_bool_opt(std::string_view key) const {
  const Value* v = typed(*this, key, ValueType::Bool);
  if (!v) return std::nullopt;
  return std::get<bool>(v->v);
}

std::vector<std::string> Reader::get_str_array(std::string_view key) const {
  const Value& v = required(*this, typed(*this, key, ValueType::Array, {ValueType::String}), key);
  const auto& items = std::get<std::vector<Value>>(v.v);
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const Value& x : items) out.push_back(std::get<std::string>(x.v));
  return out;
}

std::vector<int64_t> Reader::get_int_array(std::string_view key) const {
  const Value& v = required(
      *this, typed(*this, key, ValueType::Array, {ValueType::I32, ValueType::U32, ValueType::Bool}), key);
  const auto& items = std::get<std::vector<Value>>(v.v);
  std::vector<int64_t> out;
  out.reserve(items.size());
  for (const Value& x : items) {
    if (x.type == ValueType::I32) out.push_back(std::get<int64_t>(x.v));
    else if (x.type == ValueType::U32) out.push_back(static_cast<int64_t>(std::get<uint64_t>(x.v)));
    else out.push_back(std::get<bool>(x.v) ? 1 : 0);
  }
  return out;
}

std::vector<float> Reader::get_f32_array(std::string_view key) const {
  const Value& v = required(*this, typed(*this, key, ValueType::Array, {ValueType::F32}), key);
  const auto& items = std::get<std::vector<Value>>(v.v);
  std::vector<float> out;
  out.reserve(items.size());
  for (const Value& x : items) out.push_back(static_cast<float>(std::get<double>(x.v)));
  return out;
}

}  // namespace clover::gguf
