// Replays tests/gguf/fuzz_corpus/ (three seed files written by the Writer, the minimized corpus of
// the fuzzing runs, and any input that once crashed the reader): each must open or fail with a
// GgufError, never crash or allocate hugely.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "gguf/gguf.h"

namespace clover::gguf {
namespace {

TEST(FuzzCorpus, EveryInputOpensOrFailsCleanly) {
  const char* src = std::getenv("CLOVER_SOURCE_DIR");
  const std::filesystem::path dir =
      std::filesystem::path(src ? src : CLOVER_GGUF_TEST_SOURCE_DIR) / "tests/gguf/fuzz_corpus";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int n = 0, opened = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    ++n;
    try {
      auto r = Reader::open(e.path().string());
      for (const auto& t : r->tensors()) ASSERT_GT(t.size, 0u);
      ++opened;
    } catch (const GgufError&) {
    }
  }
  EXPECT_GE(n, 3);
  EXPECT_GE(opened, 3);  // the seeds are valid files
}

}  // namespace
}  // namespace clover::gguf
