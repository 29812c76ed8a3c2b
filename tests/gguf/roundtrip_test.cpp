// Writer -> Reader round trips: every metadata type, nested and empty arrays, versions 2 and 3,
// non-default alignments, tensors of all five types, data written in pieces, and typed getters.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"
#include "model/model_test_util.h"
#include "runtime/page_cache.h"

namespace clover::gguf {
namespace {

using test::ScratchDir;

Value scalar(ValueType t, uint64_t u, int64_t i, double d) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::U8: case ValueType::U16: case ValueType::U32: case ValueType::U64: v.v = u; break;
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64: v.v = i; break;
    case ValueType::F32: case ValueType::F64: v.v = d; break;
    default: break;
  }
  return v;
}

// Every metadata type, with extreme values where the width allows.
std::vector<std::pair<std::string, Value>> all_metadata() {
  std::vector<std::pair<std::string, Value>> kv;
  kv.emplace_back("t.u8", scalar(ValueType::U8, 255, 0, 0));
  kv.emplace_back("t.i8", scalar(ValueType::I8, 0, -128, 0));
  kv.emplace_back("t.u16", scalar(ValueType::U16, 65535, 0, 0));
  kv.emplace_back("t.i16", scalar(ValueType::I16, 0, -32768, 0));
  kv.emplace_back("t.u32", Value::u32(4000000000u));
  kv.emplace_back("t.i32", Value::i32(-2000000000));
  kv.emplace_back("t.f32", Value::f32(1e-6f));
  kv.emplace_back("t.bool.true", Value::boolean(true));
  kv.emplace_back("t.bool.false", Value::boolean(false));
  kv.emplace_back("t.str", Value::str("héllo, \"world\"\n\t"));
  kv.emplace_back("t.str.empty", Value::str(""));
  kv.emplace_back("t.str.nul", Value::str(std::string("a\0b", 3)));
  kv.emplace_back("t.u64", Value::u64(UINT64_MAX));
  kv.emplace_back("t.i64", scalar(ValueType::I64, 0, INT64_MIN, 0));
  kv.emplace_back("t.f64", scalar(ValueType::F64, 0, 0, -3.141592653589793));
  kv.emplace_back("t.arr.str", Value::str_array({"a", "", "<|im_start|>", std::string(1000, 'x')}));
  kv.emplace_back("t.arr.i32", Value::i32_array({11, 11, 10, 0, -5}));
  kv.emplace_back("t.arr.f32", Value::f32_array({0.5f, -1.0f, 1e30f}));
  kv.emplace_back("t.arr.bool", Value::bool_array({true, false, true}));
  kv.emplace_back("t.arr.u32", Value::array(ValueType::U32, {Value::u32(1), Value::u32(UINT32_MAX)}));
  kv.emplace_back("t.arr.u8", Value::array(ValueType::U8, {scalar(ValueType::U8, 0, 0, 0), scalar(ValueType::U8, 7, 0, 0)}));
  kv.emplace_back("t.arr.i8", Value::array(ValueType::I8, {scalar(ValueType::I8, 0, -1, 0)}));
  kv.emplace_back("t.arr.u16", Value::array(ValueType::U16, {scalar(ValueType::U16, 9, 0, 0)}));
  kv.emplace_back("t.arr.i16", Value::array(ValueType::I16, {scalar(ValueType::I16, 0, -9, 0)}));
  kv.emplace_back("t.arr.u64", Value::array(ValueType::U64, {Value::u64(1ull << 40)}));
  kv.emplace_back("t.arr.i64", Value::array(ValueType::I64, {scalar(ValueType::I64, 0, -(1ll << 40), 0)}));
  kv.emplace_back("t.arr.f64", Value::array(ValueType::F64, {scalar(ValueType::F64, 0, 0, 2.5)}));
  kv.emplace_back("t.arr.empty.i32", Value::i32_array({}));
  kv.emplace_back("t.arr.empty.str", Value::str_array({}));
  kv.emplace_back("t.arr.empty.arr", Value::array(ValueType::Array, {}));
  kv.emplace_back("t.arr.nested",
                  Value::array(ValueType::Array, {Value::i32_array({1, 2}), Value::i32_array({}),
                                                  Value::str_array({"x"}),
                                                  Value::array(ValueType::Array, {Value::f32_array({1.5f})})}));
  return kv;
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> dims;
  DType type;
};

const std::vector<TensorSpec> kTensors = {
    {"blk.0.f32", {7, 3}, DType::F32},
    {"blk.0.f16", {5}, DType::F16},
    {"blk.0.bf16", {3, 2, 2}, DType::BF16},
    {"blk.0.q4_0", {64, 3}, DType::Q4_0},
    {"blk.0.q8_0", {32, 2, 2, 1}, DType::Q8_0},
};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

size_t expected_bytes(const TensorSpec& t) {
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  return dtype_row_bytes(t.type, t.dims[0]) * static_cast<size_t>(n / t.dims[0]);
}

struct RoundTripCase {
  uint32_t version;
  uint32_t alignment;
};

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTrip, MetadataAndTensors) {
  const auto [version, alignment] = GetParam();
  ScratchDir dir;
  const std::string path = dir.file("rt.gguf");
  const auto kv = all_metadata();
  std::vector<std::vector<uint8_t>> data;
  {
    Writer w(path, alignment);
    w.set_version(version);
    for (const auto& [k, v] : kv) w.set(k, v);
    for (const auto& t : kTensors) w.add_tensor(t.name, t.dims, t.type);
    for (size_t i = 0; i < kTensors.size(); ++i) {
      const auto& t = kTensors[i];
      ASSERT_EQ(w.tensor_bytes(t.name), expected_bytes(t));
      data.push_back(random_bytes(expected_bytes(t), 100 + i));
      if (i == 0) {  // in three pieces
        const size_t n = data[i].size();
        w.write_tensor_data(t.name, data[i].data(), 10);
        w.append_tensor_data(data[i].data() + 10, 0);
        w.append_tensor_data(data[i].data() + 10, 30);
        w.append_tensor_data(data[i].data() + 40, n - 40);
      } else {
        w.write_tensor_data(t.name, data[i].data(), data[i].size());
      }
    }
    w.finish();
  }
  EXPECT_FALSE(test::file_exists(path + ".tmp"));

  auto r = Reader::open(path);
  EXPECT_EQ(r->version(), version);
  EXPECT_EQ(r->alignment(), alignment);
  EXPECT_EQ(r->data_offset() % alignment, 0u);
  // The writer adds general.alignment only when it is not the default.
  const size_t extra = alignment == 32 ? 0 : 1;
  ASSERT_EQ(r->metadata().size(), kv.size() + extra);
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(r->metadata()[i].first, kv[i].first);
    EXPECT_TRUE(test::values_equal(r->metadata()[i].second, kv[i].second)) << kv[i].first;
  }
  if (extra) {
    EXPECT_EQ(r->get_u32("general.alignment"), alignment);
  }

  ASSERT_EQ(r->tensors().size(), kTensors.size());
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const TensorInfo& t = r->tensors()[i];
    EXPECT_EQ(t.name, kTensors[i].name);
    EXPECT_EQ(t.dims, kTensors[i].dims);
    EXPECT_EQ(t.type, kTensors[i].type);
    EXPECT_EQ(t.size, data[i].size());
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % alignment, 0u);
    ASSERT_EQ(r->tensor(t.name), &t);
    EXPECT_EQ(std::memcmp(t.data, data[i].data(), t.size), 0) << t.name;
  }
  EXPECT_EQ(r->tensor("missing"), nullptr);
  EXPECT_EQ(r->tensors()[3].n_elements(), 192);
}

INSTANTIATE_TEST_SUITE_P(VersionsAndAlignments, RoundTrip,
                         ::testing::Values(RoundTripCase{3, 32}, RoundTripCase{2, 32}, RoundTripCase{3, 1},
                                           RoundTripCase{3, 64}, RoundTripCase{2, 4096}),
                         [](const auto& info) {
                           return "v" + std::to_string(info.param.version) + "_align" +
                                  std::to_string(info.param.alignment);
                         });

TEST(RoundTrip, LargeTensorBypassesBuffer) {
  ScratchDir dir;
  const std::string path = dir.file("big.gguf");
  const std::vector<int64_t> dims = {1024, 1300};  // 5.2 MB, more than the writer's buffer
  const auto a = random_bytes(1024 * 1300 * 4, 1);
  const auto b = random_bytes(34 * 2, 2);
  {
    Writer w(path);
    w.add_tensor("small", {3}, DType::F32);
    w.add_tensor("big", dims, DType::F32);
    w.add_tensor("q", {64}, DType::Q8_0);
    const float small[3] = {1, 2, 3};
    w.write_tensor_data("small", small, sizeof small);
    w.write_tensor_data("big", a.data(), a.size() / 2);
    w.append_tensor_data(a.data() + a.size() / 2, a.size() - a.size() / 2);
    w.write_tensor_data("q", b.data(), b.size());
    w.finish();
  }
  auto r = Reader::open(path);
  ASSERT_EQ(r->tensors().size(), 3u);
  EXPECT_EQ(std::memcmp(r->tensor("big")->data, a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(r->tensor("q")->data, b.data(), b.size()), 0);
  const float* s = reinterpret_cast<const float*>(r->tensor("small")->data);
  EXPECT_EQ(s[2], 3.0f);
  r->prefetch(*r->tensor("big"));
}

// The fraction of a file's pages in the page cache (of a mapping of it).
double cached_fraction(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  const off_t n = lseek(fd, 0, SEEK_END);
  void* p = mmap(nullptr, static_cast<size_t>(n), PROT_READ, MAP_SHARED, fd, 0);
  const double f = runtime::resident_fraction(p, static_cast<uint64_t>(n));
  munmap(p, static_cast<size_t>(n));
  ::close(fd);
  return f;
}

// --no-mmap reads the file with O_DIRECT when little of it is in the page cache (and the file
// system takes direct reads), else through the cache: the same bytes either way, over several of
// the reader's 64 MiB steps and a last block the file ends inside.
TEST(RoundTrip, InMemoryCopyHasTheFilesBytesReadDirectOrCached) {
  ScratchDir dir;
  const std::string path = dir.file("direct.gguf");
  const auto a = random_bytes(size_t{70} << 20, 5), b = random_bytes(1000, 6);
  {
    Writer w(path);
    w.add_tensor("big", {static_cast<int64_t>(a.size() / 4)}, DType::F32);
    w.add_tensor("tail", {250}, DType::F32);
    w.write_tensor_data("big", a.data(), a.size());
    w.write_tensor_data("tail", b.data(), b.size());
    w.finish();
  }
  const int probe = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  const bool direct_ok = probe >= 0;
  if (probe >= 0) ::close(probe);
  OpenOptions o;
  o.mmap = false;
  for (const bool cached : {false, true}) {
    SCOPED_TRACE(cached ? "cached" : "dropped from the page cache");
    if (cached) {  // a plain read() of the whole file brings it into the page cache
      std::vector<char> buf(size_t{1} << 20);
      const int fd = ::open(path.c_str(), O_RDONLY);
      while (::read(fd, buf.data(), buf.size()) > 0) {
      }
      ::close(fd);
    } else {
      ASSERT_TRUE(runtime::drop_from_page_cache(path));
    }
    const double resident = cached_fraction(path);
    EXPECT_EQ(resident > 0.5, cached) << "resident " << resident << ": the test did not set the cache up";
    auto r = Reader::open(path, o);
    EXPECT_NE(r->file_size() % 4096, 0u);
    EXPECT_EQ(r->read_direct(), direct_ok && resident < 0.5) << "resident " << resident;
    EXPECT_EQ(std::memcmp(r->tensor("big")->data, a.data(), a.size()), 0);
    EXPECT_EQ(std::memcmp(r->tensor("tail")->data, b.data(), b.size()), 0);
  }
}

// The in-memory copy (--no-mmap) is written in place (the CPU's repacking): a mapped file refuses;
// so does a range outside the copy; a write lands; the copy is one read-write mapping throughout,
// never re-protected (reader.cpp: on a VM with shadow page tables that cost a fault per page).
TEST(RoundTrip, InMemoryCopyIsOneWritableMapping) {
  ScratchDir dir;
  const std::string path = dir.file("w.gguf");
  const auto a = random_bytes(1024 * 1300 * 4, 3);
  {
    Writer w(path);
    w.add_tensor("first", {64}, DType::F32);
    w.add_tensor("big", {1024, 1300}, DType::F32);
    const auto f = random_bytes(64 * 4, 4);
    w.write_tensor_data("first", f.data(), f.size());
    w.write_tensor_data("big", a.data(), a.size());
    w.finish();
  }
  EXPECT_THROW(Reader::open(path)->writable(Reader::open(path)->tensor("big")->data, 4), GgufError);
  OpenOptions o;
  o.mmap = false;
  auto r = Reader::open(path, o);
  const TensorInfo& big = *r->tensor("big");
  EXPECT_THROW(r->writable(big.data + 8, big.size + r->file_size()), GgufError);
  using clover::testing::mapping_of;  // the mapping that holds a byte, from /proc/self/maps
  const auto before = mapping_of(big.data);
  ASSERT_FALSE(before.range.empty());
  EXPECT_EQ(before.access(), "rw");
  EXPECT_EQ(mapping_of(big.data + big.size - 1).range, before.range) << "one mapping";
  uint8_t* w = r->writable(big.data + 4096, 64);
  w[0] ^= 0xff;
  EXPECT_EQ(big.data[4096], static_cast<uint8_t>(a[4096] ^ 0xff));
  const auto after = mapping_of(big.data + 4096);
  EXPECT_EQ(after.range, before.range) << "one mapping, not split";
  EXPECT_EQ(after.access(), "rw");
}

TEST(RoundTrip, EmptyFile) {
  ScratchDir dir;
  const std::string path = dir.file("empty.gguf");
  {
    Writer w(path);
    w.finish();
  }
  auto r = Reader::open(path);
  EXPECT_TRUE(r->metadata().empty());
  EXPECT_TRUE(r->tensors().empty());
}

TEST(RoundTrip, SetReplacesAndKeepsOrder) {
  ScratchDir dir;
  const std::string path = dir.file("kv.gguf");
  {
    Writer w(path);
    w.set("a", Value::u32(1));
    w.set("b", Value::u32(2));
    w.set("a", Value::str("one"));
    w.finish();
  }
  auto r = Reader::open(path);
  ASSERT_EQ(r->metadata().size(), 2u);
  EXPECT_EQ(r->metadata()[0].first, "a");
  EXPECT_EQ(r->get_str("a"), "one");
  EXPECT_EQ(r->get_u32("b"), 2u);
}

// ---- typed getters ----

class Getters : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("g.gguf");
    Writer w(path_);
    w.set("u32", Value::u32(41));
    w.set("u64", Value::u64(41));
    w.set("i32", Value::i32(-1));
    w.set("f32", Value::f32(1e-6f));
    w.set("f64", scalar(ValueType::F64, 0, 0, 0.5));
    w.set("str", Value::str("qwen35moe"));
    w.set("bool", Value::boolean(true));
    w.set("strs", Value::str_array({"a", "b"}));
    w.set("i32s", Value::i32_array({11, 11, 10, 0}));
    w.set("u32s", Value::array(ValueType::U32, {Value::u32(8), Value::u32(9)}));
    w.set("bools", Value::bool_array({true, false}));
    w.set("f32s", Value::f32_array({0.25f}));
    w.set("u8s", Value::array(ValueType::U8, {scalar(ValueType::U8, 1, 0, 0)}));
    w.finish();
    r_ = Reader::open(path_);
  }
  // Runs f, expects a GgufError whose message contains every needle.
  template <typename F>
  void expect_error(F f, std::initializer_list<const char*> needles) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const GgufError& e) {
      const std::string msg = e.what();
      for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg << " lacks " << n;
    }
  }
  ScratchDir dir_;
  std::string path_;
  std::unique_ptr<Reader> r_;
};

TEST_F(Getters, ExactTypes) {
  EXPECT_EQ(r_->get_u32("u32"), 41u);
  EXPECT_EQ(r_->get_u32_opt("u32"), 41u);
  EXPECT_EQ(r_->get_u32_opt("nope"), std::nullopt);
  EXPECT_EQ(r_->get_f32("f32"), 1e-6f);
  EXPECT_EQ(r_->get_f32_opt("nope"), std::nullopt);
  EXPECT_EQ(r_->get_str("str"), "qwen35moe");
  EXPECT_EQ(r_->get_str_opt("nope"), std::nullopt);
  EXPECT_EQ(r_->get_bool_opt("bool"), true);
  EXPECT_EQ(r_->get_bool_opt("nope"), std::nullopt);
  EXPECT_EQ(r_->get_str_array("strs"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r_->get_int_array("i32s"), (std::vector<int64_t>{11, 11, 10, 0}));
  EXPECT_EQ(r_->get_int_array("u32s"), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(r_->get_int_array("bools"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(r_->get_f32_array("f32s"), (std::vector<float>{0.25f}));
  EXPECT_TRUE(r_->has("u64"));
  EXPECT_FALSE(r_->has("nope"));
}

TEST_F(Getters, WrongTypeNamesKeyExpectedAndActual) {
  expect_error([&] { r_->get_u32("u64"); }, {"g.gguf", "'u64'", "u64", "expected u32"});
  expect_error([&] { r_->get_u32_opt("i32"); }, {"'i32'", "i32", "expected u32"});
  expect_error([&] { r_->get_f32("f64"); }, {"'f64'", "f64", "expected f32"});
  expect_error([&] { r_->get_f32_opt("u32"); }, {"'u32'", "expected f32"});
  expect_error([&] { r_->get_str("u32"); }, {"'u32'", "expected string"});
  expect_error([&] { r_->get_str_opt("strs"); }, {"'strs'", "array of string", "expected string"});
  expect_error([&] { r_->get_bool_opt("u32"); }, {"'u32'", "expected bool"});
  expect_error([&] { r_->get_str_array("i32s"); }, {"'i32s'", "array of i32", "expected array of string"});
  expect_error([&] { r_->get_str_array("str"); }, {"'str'", "type string", "expected array of string"});
  expect_error([&] { r_->get_int_array("u8s"); }, {"'u8s'", "array of u8", "expected array of i32/u32/bool"});
  expect_error([&] { r_->get_int_array("f32s"); }, {"'f32s'", "array of f32"});
  expect_error([&] { r_->get_f32_array("i32s"); }, {"'i32s'", "expected array of f32"});
}

TEST_F(Getters, MissingRequiredKey) {
  expect_error([&] { r_->get_u32("qwen35moe.block_count"); }, {"g.gguf", "'qwen35moe.block_count'", "not found"});
  expect_error([&] { r_->get_f32("x"); }, {"'x'", "not found"});
  expect_error([&] { r_->get_str("x"); }, {"'x'", "not found"});
  expect_error([&] { r_->get_str_array("x"); }, {"'x'", "not found"});
  expect_error([&] { r_->get_int_array("x"); }, {"'x'", "not found"});
  expect_error([&] { r_->get_f32_array("x"); }, {"'x'", "not found"});
}

}  // namespace
}  // namespace clover::gguf
