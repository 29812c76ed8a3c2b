// Corrupt and hostile files: every case must end in a GgufError that names the file and the item at
// fault (or, for harmless damage, in a successful parse), never in a crash or a huge allocation.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <iterator>
#include <random>

#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"

namespace clover::gguf {
namespace {

using test::RawGguf;
using test::ScratchDir;

constexpr uint32_t kU32 = 4, kString = 8, kArray = 9, kU64 = 10, kBool = 7;
constexpr uint32_t kF32 = 0, kQ4_0 = 2, kQ8_0 = 8;

class Corrupt : public ::testing::Test {
 protected:
  // Opens `bytes` as a file; expects a GgufError mentioning the file name and every needle.
  void expect_error(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> needles) {
    const std::string path = dir_.file("bad.gguf");
    test::write_bytes(path, bytes);
    try {
      Reader::open(path);
      ADD_FAILURE() << "opened without error; wanted " << *needles.begin();
    } catch (const GgufError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
      for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg << "\n  lacks: " << n;
    }
  }
  std::unique_ptr<Reader> open_ok(const std::vector<uint8_t>& bytes) {
    const std::string path = dir_.file("ok.gguf");
    test::write_bytes(path, bytes);
    return Reader::open(path);
  }
  // A valid file with one tensor: {n_dims dims} of `type` at `offset`, then `data` bytes.
  static std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                                         size_t data, const std::string& name = "w") {
    RawGguf g;
    g.header(1, 0).tensor(name, dims, type, offset).pad(32).zeros(data);
    return g.b;
  }
  ScratchDir dir_;
};

// ---- header ----

TEST_F(Corrupt, BadMagic) {
  RawGguf g;
  g.bytes("GGML", 4).u32(3).u64(0).u64(0);
  expect_error(g.b, {"not a GGUF file", "GGML"});
}

TEST_F(Corrupt, Versions) {
  expect_error(RawGguf().header(0, 0, 1).b, {"version 1 is not supported"});
  expect_error(RawGguf().header(0, 0, 4).b, {"unsupported GGUF version 4"});
  expect_error(RawGguf().header(0, 0, 0).b, {"unsupported GGUF version 0"});
  expect_error(RawGguf().header(0, 0, 3u << 24).b, {"big-endian"});
  EXPECT_EQ(open_ok(RawGguf().header(0, 0, 2).b)->version(), 2u);
  EXPECT_EQ(open_ok(RawGguf().header(0, 0, 3).b)->version(), 3u);
}

TEST_F(Corrupt, TooShort) {
  expect_error({}, {"truncated"});
  expect_error({'G', 'G', 'U', 'F'}, {"truncated"});
  expect_error(RawGguf().bytes("GGUF", 4).u32(3).u64(0).b, {"truncated", "metadata count"});
}

TEST_F(Corrupt, ImplausibleCounts) {
  expect_error(RawGguf().header(0, uint64_t{1} << 60).b, {"implausible counts"});
  expect_error(RawGguf().header(uint64_t{1} << 60, 0).b, {"implausible counts"});
  expect_error(RawGguf().header(UINT64_MAX, UINT64_MAX).b, {"implausible counts"});
  expect_error(RawGguf().header(1, 1).zeros(40).b, {});  // fits the count check, then fails parsing
}

// ---- metadata ----

TEST_F(Corrupt, EmptyAndDuplicateKeys) {
  expect_error(RawGguf().header(0, 1).kv_u32("", 1).b, {"empty key"});
  expect_error(RawGguf().header(0, 2).kv_u32("a.b", 1).kv_str("a.b", "x").b, {"duplicate key 'a.b'"});
}

TEST_F(Corrupt, InvalidValueTypes) {
  expect_error(RawGguf().header(0, 1).str("k").u32(13).u32(0).b, {"key 'k'", "invalid value type 13"});
  expect_error(RawGguf().header(0, 1).str("k").u32(kArray).u32(99).u64(0).b,
               {"key 'k'", "invalid array element type 99"});
  expect_error(RawGguf().header(0, 1).str("k").u32(kBool).u8(2).b, {"key 'k'", "bool", "0 or 1"});
}

TEST_F(Corrupt, HugeLengths) {
  expect_error(RawGguf().header(0, 1).str("k").u32(kString).u64(uint64_t{1} << 62).b, {"key 'k'", "claims"});
  expect_error(RawGguf().header(0, 1).str("k").u32(kArray).u32(kU32).u64(uint64_t{1} << 62).b,
               {"key 'k'", "cannot fit"});
  expect_error(RawGguf().header(0, 1).str("k").u32(kArray).u32(kU64).u64(UINT64_MAX).b, {"key 'k'", "cannot fit"});
  // Strings are at least 8 bytes each, arrays at least 12: counts are checked against that.
  expect_error(RawGguf().header(0, 1).str("k").u32(kArray).u32(kString).u64(4).zeros(31).b, {"key 'k'", "cannot fit"});
  expect_error(RawGguf().header(0, 1).u64(uint64_t{1} << 50).zeros(8).b, {"metadata entry 0", "key"});
}

TEST_F(Corrupt, DeepNesting) {
  RawGguf g;
  g.header(0, 1).str("k").u32(kArray);
  for (int i = 0; i < 40; ++i) g.u32(kArray).u64(1);
  g.u32(kU32).u64(0);
  expect_error(g.b, {"key 'k'", "nests arrays deeper"});
}

TEST_F(Corrupt, AlignmentKey) {
  expect_error(RawGguf().header(0, 1).str("general.alignment").u32(kU64).u64(32).b,
               {"'general.alignment'", "u64", "expected u32"});
  expect_error(RawGguf().header(0, 1).kv_u32("general.alignment", 48).b, {"'general.alignment'", "power of two"});
  expect_error(RawGguf().header(0, 1).kv_u32("general.alignment", 0).b, {"'general.alignment'", "power of two"});
  // A valid non-default alignment moves the data section and the offset rule.
  RawGguf g;
  g.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {4}, kF32, 0).pad(64).zeros(16);
  auto r = open_ok(g.b);
  EXPECT_EQ(r->alignment(), 64u);
  EXPECT_EQ(r->data_offset() % 64, 0u);
  RawGguf m;
  m.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {4}, kF32, 32).pad(64).zeros(64);
  expect_error(m.b, {"tensor 'w'", "offset 32", "alignment 64"});
}

// ---- tensor infos ----

TEST_F(Corrupt, BadDims) {
  expect_error(one_tensor({}, kF32, 0, 32), {"tensor 'w'", "0 dims"});
  expect_error(one_tensor({1, 1, 1, 1, 1}, kF32, 0, 32), {"tensor 'w'", "5 dims"});
  expect_error(one_tensor({4, 0}, kF32, 0, 32), {"tensor 'w'", "dim 1 = 0"});
  expect_error(one_tensor({uint64_t{1} << 63}, kF32, 0, 32), {"tensor 'w'", "dim 0"});
  expect_error(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0, 32), {"tensor 'w'", "element count that overflows"});
  expect_error(one_tensor({uint64_t{1} << 62}, kF32, 0, 32), {"tensor 'w'", "byte size that overflows"});
  expect_error(one_tensor({48, 2}, kQ4_0, 0, 64), {"tensor 'w'", "ne0 = 48", "Q4_0", "block size 32"});
  expect_error(one_tensor({16}, kQ8_0, 0, 64), {"tensor 'w'", "ne0 = 16"});
  RawGguf n;
  n.header(1, 0).str("w").u32(UINT32_MAX).b.resize(200);
  expect_error(n.b, {"tensor 'w'", "4294967295 dims"});
}

TEST_F(Corrupt, UnsupportedTypes) {
  expect_error(one_tensor({256}, 16, 0, 256), {"tensor 'w'", "IQ2_XXS (16)", "not support", "supported: F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K"});
  expect_error(one_tensor({256}, 15, 0, 256), {"tensor 'w'", "Q8_K (15)", "not support"});  // activations only
  expect_error(one_tensor({256}, 99, 0, 256), {"tensor 'w'", "unknown (99)"});
  expect_error(one_tensor({256}, 9, 0, 256), {"tensor 'w'", "Q8_1 (9)", "not support"});  // activations only
  expect_error(one_tensor({256}, 21, 0, 256), {"tensor 'w'", "IQ3_S (21)", "not support"});
}

TEST_F(Corrupt, DuplicateAndEmptyTensorNames) {
  RawGguf g;
  g.header(2, 0).tensor("w", {8}, kF32, 0).tensor("w", {8}, kF32, 32).pad(32).zeros(64);
  expect_error(g.b, {"duplicate tensor 'w'"});
  expect_error(one_tensor({8}, kF32, 0, 32, ""), {"empty name"});
}

TEST_F(Corrupt, MisalignedOffset) {
  expect_error(one_tensor({4}, kF32, 16, 64), {"tensor 'w'", "offset 16", "alignment 32"});
  expect_error(one_tensor({4}, kF32, 1, 64), {"tensor 'w'", "offset 1,"});
}

TEST_F(Corrupt, DataOutOfRange) {
  expect_error(one_tensor({8}, kF32, 0, 31), {"tensor 'w'", "past the end"});
  expect_error(one_tensor({8}, kF32, 32, 32), {"tensor 'w'", "past the end"});
  expect_error(one_tensor({8}, kF32, UINT64_MAX - 31, 32), {"tensor 'w'", "past the end"});
  expect_error(one_tensor({uint64_t{1} << 40}, kF32, 0, 32), {"tensor 'w'", "past the end"});
  auto r = open_ok(one_tensor({8}, kF32, 0, 32));  // exactly fits
  EXPECT_EQ(r->tensor("w")->size, 32u);
  EXPECT_EQ(r->tensor("w")->data + 32, r->tensor("w")->data + r->file_size() - r->data_offset());
}

TEST_F(Corrupt, OverlappingTensors) {
  RawGguf same;
  same.header(2, 0).tensor("a", {8}, kF32, 0).tensor("b", {8}, kF32, 0).pad(32).zeros(64);
  expect_error(same.b, {"overlaps"});
  RawGguf partial;  // a = [0, 64), b = [32, 64)
  partial.header(2, 0).tensor("b", {8}, kF32, 32).tensor("a", {16}, kF32, 0).pad(32).zeros(96);
  expect_error(partial.b, {"tensor 'a'", "overlaps tensor 'b'"});
  RawGguf adjacent;  // touching is fine, in any order
  adjacent.header(2, 0).tensor("b", {8}, kF32, 32).tensor("a", {8}, kF32, 0).pad(32).zeros(64);
  EXPECT_EQ(open_ok(adjacent.b)->tensors().size(), 2u);
}

TEST_F(Corrupt, NoTensorsNoPadding) {
  RawGguf g;
  g.header(0, 1).kv_u32("k", 7);  // ends right after the metadata
  auto r = open_ok(g.b);
  EXPECT_EQ(r->get_u32("k"), 7u);
  EXPECT_LE(r->data_offset(), r->file_size());
}

TEST_F(Corrupt, MissingFile) {
  EXPECT_THROW(Reader::open(dir_.file("does-not-exist.gguf")), GgufError);
  EXPECT_THROW(Reader::open(dir_.path()), GgufError);  // a directory
}

// ---- systematic damage to a realistic small file ----

class Damage : public Corrupt {
 protected:
  void SetUp() override {
    const std::string path = dir_.file("good.gguf");
    Writer w(path);
    w.set("general.architecture", Value::str("qwen35moe"));
    w.set("qwen35moe.block_count", Value::u32(2));
    w.set("qwen35moe.rope.dimension_sections", Value::i32_array({11, 11, 10, 0}));
    w.set("tokenizer.ggml.tokens", Value::str_array({"a", "b", "<|im_end|>", ""}));
    w.set("t.nested", Value::array(ValueType::Array, {Value::f32_array({1, 2}), Value::bool_array({true})}));
    w.set("t.f32", Value::f32(0.5f));
    w.add_tensor("blk.0.attn_norm.weight", {8}, DType::F32);
    w.add_tensor("blk.0.ffn_down_exps.weight", {32, 2, 2}, DType::Q8_0);
    w.add_tensor("blk.0.attn_q.weight", {64, 1}, DType::Q4_0);
    w.add_tensor("output.weight", {4, 3}, DType::F16);
    w.begin_data();
    std::mt19937 rng(7);
    for (const char* name : {"blk.0.attn_norm.weight", "blk.0.ffn_down_exps.weight", "blk.0.attn_q.weight",
                             "output.weight"}) {
      std::vector<uint8_t> d(w.tensor_bytes(name));
      for (auto& x : d) x = static_cast<uint8_t>(rng());
      w.write_tensor_data(name, d.data(), d.size());
    }
    w.finish();
    good_ = test::read_bytes(path);
    auto r = Reader::open(path);
    data_offset_ = r->data_offset();
    for (const auto& t : r->tensors()) data_end_ = std::max<uint64_t>(data_end_, data_offset_ + t.offset + t.size);
  }
  void TearDown() override {
    if (memfd_ >= 0) close(memfd_);
  }
  // Opens the bytes; returns true on success, false on GgufError; any other exception fails.
  // Thousands of cases go through one memfd (opened by path via /proc) to stay off the disk.
  bool try_open(const std::vector<uint8_t>& bytes) {
    if (memfd_ < 0) memfd_ = memfd_create("gguf-damage", MFD_CLOEXEC);
    EXPECT_GE(memfd_, 0);
    EXPECT_EQ(ftruncate(memfd_, 0), 0);
    EXPECT_EQ(pwrite(memfd_, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    const std::string path = "/proc/self/fd/" + std::to_string(memfd_);
    try {
      auto r = Reader::open(path);
      // Touch what a caller could: every tensor's first and last byte lies inside the mapping.
      uint64_t sum = 0;
      for (const auto& t : r->tensors()) sum += t.data[0] + t.data[t.size - 1];
      (void)sum;
      return true;
    } catch (const GgufError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      return false;
    }
  }
  int memfd_ = -1;
  std::vector<uint8_t> good_;
  uint64_t data_offset_ = 0;
  uint64_t data_end_ = 0;
};

TEST_F(Damage, TruncationAtEveryHeaderByte) {
  ASSERT_GT(data_offset_, 100u);
  for (uint64_t cut = 0; cut <= data_offset_; ++cut) {
    std::vector<uint8_t> b(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_FALSE(try_open(b)) << "truncated at " << cut << " opened";
  }
}

TEST_F(Damage, TruncationInData) {
  for (uint64_t cut = data_offset_; cut < good_.size(); cut += 3) {
    std::vector<uint8_t> b(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(cut));
    // Cutting into any tensor's bytes is an error; cutting only trailing padding is harmless.
    EXPECT_EQ(try_open(b), cut >= data_end_) << "truncated at " << cut;
  }
  EXPECT_TRUE(try_open(good_));
}

TEST_F(Damage, RandomByteFlipsInHeaderAndTables) {
  std::mt19937 rng(12345);
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    std::vector<uint8_t> b = good_;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % data_offset_;
      b[at] = (rng() % 2) ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(b[at] ^ (1u << (rng() % 8)));
    }
    (try_open(b) ? ok : rejected)++;
  }
  EXPECT_GT(rejected, 2500);  // most damage is caught; the rest hits string bytes or values
  RecordProperty("opened", ok);
  RecordProperty("rejected", rejected);
}

TEST_F(Damage, RandomWordOverwrites) {
  // Overwrite aligned 8-byte words with extreme values: counts, lengths, dims and offsets.
  std::mt19937 rng(777);
  const uint64_t extremes[] = {0, 1, 0x7fffffffffffffffull, 0x8000000000000000ull, UINT64_MAX,
                               UINT64_MAX - 31, uint64_t{1} << 32, 0xffffffffull, 255};
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<uint8_t> b = good_;
    const size_t at = rng() % (data_offset_ - 8);
    const uint64_t x = extremes[rng() % std::size(extremes)];
    std::memcpy(b.data() + at, &x, rng() % 2 ? 8 : 4);
    try_open(b);
  }
}

}  // namespace
}  // namespace clover::gguf
