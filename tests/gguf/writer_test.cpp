// Writer contract: atomic appearance of the file, exact byte accounting per tensor, declaration
// order, and refusal of invalid declarations.
#include <gtest/gtest.h>

#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"

namespace clover::gguf {
namespace {

using test::file_exists;
using test::ScratchDir;

TEST(Writer, UnfinishedWriterLeavesNoFile) {
  ScratchDir dir;
  const std::string path = dir.file("a.gguf");
  {
    Writer w(path);
    w.set("k", Value::u32(1));
    w.add_tensor("t", {4}, DType::F32);
    const float x[2] = {1, 2};
    w.write_tensor_data("t", x, sizeof x);
    EXPECT_TRUE(file_exists(path + ".tmp"));
    EXPECT_FALSE(file_exists(path));
  }
  EXPECT_FALSE(file_exists(path));
  EXPECT_FALSE(file_exists(path + ".tmp"));
}

TEST(Writer, ExistingFileReplacedOnlyByFinish) {
  ScratchDir dir;
  const std::string path = dir.file("a.gguf");
  test::write_bytes(path, {'o', 'l', 'd'});
  {
    Writer w(path);
    w.set("k", Value::u32(1));
    w.begin_data();
    EXPECT_EQ(test::read_bytes(path).size(), 3u);  // untouched until finish
  }
  EXPECT_EQ(test::read_bytes(path).size(), 3u);  // abandoned: still the old file
  {
    Writer w(path);
    w.set("k", Value::u32(2));
    w.finish();
  }
  EXPECT_EQ(Reader::open(path)->get_u32("k"), 2u);
}

TEST(Writer, FinishWithMissingBytesThrows) {
  ScratchDir dir;
  const std::string path = dir.file("a.gguf");
  {
    Writer w(path);
    w.add_tensor("t", {4}, DType::F32);
    const float x[3] = {1, 2, 3};
    w.write_tensor_data("t", x, sizeof x);
    EXPECT_THROW(w.finish(), GgufError);
  }
  EXPECT_FALSE(file_exists(path));
  EXPECT_FALSE(file_exists(path + ".tmp"));
}

TEST(Writer, FinishWithUnwrittenTensorThrows) {
  ScratchDir dir;
  const std::string path = dir.file("a.gguf");
  {
    Writer w(path);
    w.add_tensor("t", {4}, DType::F32);
    w.add_tensor("u", {4}, DType::F32);
    const float x[4] = {1, 2, 3, 4};
    w.write_tensor_data("t", x, sizeof x);
    try {
      w.finish();
      ADD_FAILURE() << "finish succeeded";
    } catch (const GgufError& e) {
      EXPECT_NE(std::string(e.what()).find("'u'"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(file_exists(path));
}

TEST(Writer, TooManyBytesThrows) {
  ScratchDir dir;
  Writer w(dir.file("a.gguf"));
  w.add_tensor("t", {4}, DType::F32);
  const float x[5] = {};
  EXPECT_THROW(w.write_tensor_data("t", x, sizeof x), GgufError);
  w.write_tensor_data("t", x, 12);
  EXPECT_THROW(w.append_tensor_data(x, 8), GgufError);
  w.append_tensor_data(x, 4);
  EXPECT_THROW(w.append_tensor_data(x, 1), GgufError);
  w.finish();
}

TEST(Writer, DeclarationOrderEnforced) {
  ScratchDir dir;
  Writer w(dir.file("a.gguf"));
  w.add_tensor("a", {1}, DType::F32);
  w.add_tensor("b", {1}, DType::F32);
  const float x = 1;
  EXPECT_THROW(w.append_tensor_data(&x, 4), GgufError);  // nothing started
  EXPECT_THROW(w.write_tensor_data("b", &x, 4), GgufError);
  w.write_tensor_data("a", &x, 4);
  EXPECT_THROW(w.write_tensor_data("a", &x, 4), GgufError);
  EXPECT_THROW(w.write_tensor_data("nope", &x, 4), GgufError);
  w.write_tensor_data("b", &x, 4);
  EXPECT_THROW(w.write_tensor_data("c", &x, 4), GgufError);
  w.finish();
  EXPECT_THROW(w.finish(), GgufError);
}

TEST(Writer, IncompleteTensorBlocksTheNext) {
  ScratchDir dir;
  Writer w(dir.file("a.gguf"));
  w.add_tensor("a", {2}, DType::F32);
  w.add_tensor("b", {1}, DType::F32);
  const float x[2] = {};
  w.write_tensor_data("a", x, 4);
  EXPECT_THROW(w.write_tensor_data("b", x, 4), GgufError);
}

TEST(Writer, NoDeclarationsAfterBeginData) {
  ScratchDir dir;
  Writer w(dir.file("a.gguf"));
  w.begin_data();
  EXPECT_THROW(w.set("k", Value::u32(1)), GgufError);
  EXPECT_THROW(w.add_tensor("t", {1}, DType::F32), GgufError);
  EXPECT_THROW(w.set_version(2), GgufError);
}

TEST(Writer, RejectsBadTensorDeclarations) {
  ScratchDir dir;
  Writer w(dir.file("a.gguf"));
  EXPECT_THROW(w.add_tensor("", {1}, DType::F32), GgufError);
  EXPECT_THROW(w.add_tensor("t", {}, DType::F32), GgufError);
  EXPECT_THROW(w.add_tensor("t", {1, 1, 1, 1, 1}, DType::F32), GgufError);
  EXPECT_THROW(w.add_tensor("t", {0}, DType::F32), GgufError);
  EXPECT_THROW(w.add_tensor("t", {4, -1}, DType::F32), GgufError);
  EXPECT_THROW(w.add_tensor("t", {48}, DType::Q4_0), GgufError);  // not whole blocks
  EXPECT_THROW(w.add_tensor("t", {16, 2}, DType::Q8_0), GgufError);
  EXPECT_THROW(w.add_tensor("t", {INT64_MAX, 2}, DType::F32), GgufError);
  EXPECT_THROW(w.add_tensor("t", {1}, static_cast<DType>(12)), GgufError);
  w.add_tensor("t", {32}, DType::Q4_0);
  EXPECT_EQ(w.tensor_bytes("t"), 18u);
  EXPECT_THROW(w.add_tensor("t", {32}, DType::Q4_0), GgufError);  // duplicate
  EXPECT_THROW(w.tensor_bytes("nope"), GgufError);
}

TEST(Writer, RejectsInconsistentValues) {
  ScratchDir dir;
  Writer w(dir.file("a.gguf"));
  Value bad_u8;
  bad_u8.type = ValueType::U8;
  bad_u8.v = uint64_t{300};
  EXPECT_THROW(w.set("k", bad_u8), GgufError);
  Value wrong_alt;
  wrong_alt.type = ValueType::String;
  wrong_alt.v = uint64_t{1};
  EXPECT_THROW(w.set("k", wrong_alt), GgufError);
  EXPECT_THROW(w.set("k", Value::array(ValueType::I32, {Value::u32(1)})), GgufError);
  EXPECT_THROW(w.set("", Value::u32(1)), GgufError);
  Value bad_type;
  bad_type.type = static_cast<ValueType>(13);
  EXPECT_THROW(w.set("k", bad_type), GgufError);
}

TEST(Writer, NestingDepthMatchesTheReader) {
  ScratchDir dir;
  auto nest = [](int levels) {
    Value v = Value::i32_array({1});
    for (int i = 1; i < levels; ++i) v = Value::array(ValueType::Array, {v});
    return v;
  };
  {
    Writer w(dir.file("a.gguf"));
    EXPECT_THROW(w.set("deep", nest(9)), GgufError);
    w.set("deep", nest(8));
    w.finish();
  }
  auto r = Reader::open(dir.file("a.gguf"));
  EXPECT_TRUE(test::values_equal(*r->find("deep"), nest(8)));
}

TEST(Writer, AlignmentChecks) {
  ScratchDir dir;
  EXPECT_THROW(Writer(dir.file("a.gguf"), 0), GgufError);
  EXPECT_THROW(Writer(dir.file("a.gguf"), 48), GgufError);
  EXPECT_FALSE(file_exists(dir.file("a.gguf.tmp")));
  {
    Writer w(dir.file("a.gguf"), 64);
    w.set("general.alignment", Value::u32(32));  // disagrees with the writer
    EXPECT_THROW(w.begin_data(), GgufError);
  }
  {
    Writer w(dir.file("b.gguf"), 64);
    w.set("general.alignment", Value::u32(64));  // agrees: kept once
    w.finish();
  }
  auto r = Reader::open(dir.file("b.gguf"));
  EXPECT_EQ(r->alignment(), 64u);
  EXPECT_EQ(r->metadata().size(), 1u);
}

TEST(Writer, UnwritableDirectory) {
  EXPECT_THROW(Writer("/nonexistent-dir-clover/a.gguf"), GgufError);
}

}  // namespace
}  // namespace clover::gguf
