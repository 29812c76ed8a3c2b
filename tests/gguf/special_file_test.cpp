// Issue #26, finding 6: a FIFO given as the model is refused at once (open() used to wait for a
// writer forever).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "gguf/gguf.h"

namespace clover::gguf {
namespace {

TEST(SpecialFiles, FifoIsRefusedWithoutWaiting) {
  const std::filesystem::path fifo = std::filesystem::temp_directory_path() / ("clover_fifo_" + std::to_string(getpid()));
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto opened = std::async(std::launch::async, [&] {
    try {
      Reader::open(fifo.string());
      return std::string("opened");
    } catch (const GgufError& e) {
      return std::string(e.what());
    }
  });
  const bool answered = opened.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
  if (!answered) {  // unblock the reader so that the test ends
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  const std::string msg = opened.get();
  std::filesystem::remove(fifo);
  EXPECT_TRUE(answered) << "Reader::open waited on a FIFO";
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

TEST(SpecialFiles, DirectoryIsRefused) {
  EXPECT_THROW(Reader::open(std::filesystem::temp_directory_path().string()), GgufError);
}

}  // namespace
}  // namespace clover::gguf
