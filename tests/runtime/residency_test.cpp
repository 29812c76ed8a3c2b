// runtime/residency.h: the pre-fault walks every byte of its ranges in order, in the background
// too, and stops at the next step when asked (the engine's shutdown during a pre-fault).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "runtime/residency.h"

namespace clover::runtime {
namespace {

// A read-only shared mapping of a temporary file of `bytes` bytes (a pattern, so pages are real).
struct MappedFile {
  explicit MappedFile(size_t bytes) : size(bytes) {
    char tmpl[] = "/tmp/clover-residency-XXXXXX";
    fd = mkstemp(tmpl);
    path = tmpl;
    std::vector<uint8_t> chunk(1 << 20);
    for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<uint8_t>(i * 31 + 7);
    for (size_t done = 0; done < bytes; done += chunk.size())
      EXPECT_EQ(write(fd, chunk.data(), std::min(chunk.size(), bytes - done)), static_cast<ssize_t>(std::min(chunk.size(), bytes - done)));
    data = static_cast<const uint8_t*>(mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0));
  }
  ~MappedFile() {
    munmap(const_cast<uint8_t*>(data), size);
    close(fd);
    unlink(path.c_str());
  }
  size_t size;
  int fd = -1;
  std::string path;
  const uint8_t* data = nullptr;
};

// Ranges out of order and not page-aligned, as tensors are.
ByteRanges scattered(const MappedFile& f) {
  const size_t q = f.size / 4;
  return {{f.data + 2 * q + 100, q - 100}, {f.data + 13, q - 13}, {f.data + 3 * q, q}, {f.data + q, q}};
}

TEST(Residency, PrefaultWalksEveryByteInOrderWithProgress) {
  MappedFile f(24 << 20);
  const ByteRanges r = scattered(f);
  std::vector<uint64_t> seen;
  const uint64_t done = prefault_ranges(r, nullptr, [&](uint64_t d, uint64_t total) {
    EXPECT_EQ(total, total_bytes(r));
    seen.push_back(d);
  });
  EXPECT_EQ(done, total_bytes(r));
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), total_bytes(r));
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i], seen[i - 1]);
  EXPECT_GE(seen.size(), total_bytes(r) / kStepBytes);
  // Resident now: mincore reports every page of the ranges in memory.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in(f.size / page + 1);
  ASSERT_EQ(mincore(const_cast<uint8_t*>(f.data), f.size, in.data()), 0);
  for (size_t p = 0; p < f.size / page; ++p) EXPECT_TRUE(in[p] & 1) << "page " << p;
}

TEST(Residency, BackgroundPrefaultFinishesAndReports) {
  MappedFile f(16 << 20);
  std::atomic<uint64_t> last{0};
  BackgroundPrefault bg(scattered(f), [&](uint64_t d, uint64_t) { last = d; });
  const auto t0 = std::chrono::steady_clock::now();
  while (bg.status().state == BackgroundPrefault::State::Running && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const BackgroundPrefault::Status s = bg.status();
  EXPECT_EQ(s.state, BackgroundPrefault::State::Done);
  EXPECT_EQ(s.done, s.total);
  EXPECT_EQ(s.total, total_bytes(scattered(f)));
  EXPECT_EQ(last.load(), s.total);
  EXPECT_GT(s.seconds, 0.0);
  EXPECT_EQ(bg.status().seconds, s.seconds) << "the time is frozen once the walk has ended";
}

TEST(Residency, StoppingDuringTheWalkEndsItAtTheNextStep) {
  MappedFile f(32 << 20);
  BackgroundPrefault::Options o;
  o.step_bytes = 1 << 20;
  o.pause = std::chrono::milliseconds(20);  // 32 steps: at least 640 ms of walking
  auto bg = std::make_unique<BackgroundPrefault>(ByteRanges{{f.data, f.size}}, nullptr, o);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_EQ(bg->status().state, BackgroundPrefault::State::Running);
  const auto t0 = std::chrono::steady_clock::now();
  bg->stop();
  const double stop_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const BackgroundPrefault::Status s = bg->status();
  EXPECT_EQ(s.state, BackgroundPrefault::State::Stopped);
  EXPECT_GT(s.done, 0u);
  EXPECT_LT(s.done, s.total);
  EXPECT_LT(stop_ms, 500.0) << "one step and one pause at most";
  bg->stop();  // idempotent
  bg.reset();  // the destructor after stop()
}

TEST(Residency, DestroyingWhileRunningJoinsTheThread) {
  MappedFile f(8 << 20);
  BackgroundPrefault::Options o;
  o.step_bytes = 1 << 20;
  o.pause = std::chrono::milliseconds(50);
  for (int i = 0; i < 3; ++i) BackgroundPrefault bg(ByteRanges{{f.data, f.size}}, [](uint64_t, uint64_t) {}, o);
}

TEST(Residency, EmptyRangesAreDoneAtOnce) {
  BackgroundPrefault bg(ByteRanges{}, nullptr);
  bg.stop();
  EXPECT_EQ(bg.status().state, BackgroundPrefault::State::Done);
  EXPECT_EQ(prefault_ranges({}, nullptr, nullptr), 0u);
}

// A file truncated under its mapping (pages past the new end raise SIGBUS when read): the walk
// skips what the kernel refuses to populate instead of reading it; the engine refuses passes.
TEST(Residency, ATruncatedFileIsSkippedNotRead) {
  MappedFile f(8 << 20);
  ASSERT_EQ(ftruncate(f.fd, 1 << 20), 0);
  EXPECT_EQ(prefault_ranges({{f.data, f.size}}, nullptr, nullptr), f.size);
}

TEST(Residency, LockRangesLocksEveryByte) {
  MappedFile f(2 << 20);  // well below the usual 8 MiB RLIMIT_MEMLOCK
  const LockResult r = lock_ranges(scattered(f), nullptr);
  EXPECT_EQ(r.error, 0) << lock_refusal_message(r, total_bytes(scattered(f)));
  EXPECT_EQ(r.locked, total_bytes(scattered(f)));
  munlock(f.data, f.size);
}

}  // namespace
}  // namespace clover::runtime
