// Replays every input kept under tests/chat/fuzz/regressions/<target>/ (crashers the fuzzers found,
// plus seeds) through the fuzz bodies, so fixed bugs stay fixed without clang or libFuzzer.
#include <gtest/gtest.h>

#include <filesystem>

#include "fixtures_util.h"
#include "fuzz/fuzz_bodies.h"

namespace clover::chat::fuzz {
namespace {

void replay(const std::string& target, int (*body)(const uint8_t*, size_t)) {
  std::filesystem::path dir = std::filesystem::path(testing::chat_test_dir()) / "fuzz" / "regressions" / target;
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::string data = testing::read_file(e.path().string());
    SCOPED_TRACE(e.path().string());
    body(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    ++n;
  }
  EXPECT_GT(n, 0u) << "no regression inputs in " << dir;
}

TEST(ChatFuzzRegressions, Jinja) { replay("jinja", jinja_one); }
TEST(ChatFuzzRegressions, Parser) { replay("parser", parser_one); }
TEST(ChatFuzzRegressions, Render) { replay("render", render_one); }

}  // namespace
}  // namespace clover::chat::fuzz
