// runtime/huge_pages.h: map_huge gives whole huge pages on a 2 MiB boundary and gives them back;
// arrays of a huge page or more live there and the kernel grants them huge pages; smaller ones are
// ordinary allocations.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/huge_pages.h"

namespace clover::runtime {
namespace {

bool aligned_2m(const void* p) { return reinterpret_cast<uintptr_t>(p) % kHugePageBytes == 0; }

TEST(HugePages, LargeArraysStartOnAHugePageAndKeepTheirValues) {
  HugePageVector<float> a(5 * kHugePageBytes / sizeof(float) / 2);  // 2.5 huge pages
  ASSERT_TRUE(aligned_2m(a.data()));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 1013);
  HugePageVector<float> b;
  b = a;  // a snapshot's copy
  ASSERT_TRUE(aligned_2m(b.data()));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < b.size(); i += 4099) ASSERT_EQ(b[i], static_cast<float>(i % 1013)) << i;
  b.assign(b.size(), 0.f);
  EXPECT_EQ(b[b.size() - 1], 0.f);
  EXPECT_EQ(a[a.size() - 1], static_cast<float>((a.size() - 1) % 1013));
}

// Whether every page of [p, p + n) is mapped (mincore fails with ENOMEM on a hole).
bool mapped(const void* p, size_t n) {
  std::vector<unsigned char> vec(n / 4096 + 1);
  return mincore(const_cast<void*>(p), n, vec.data()) == 0;
}

TEST(HugePages, MapHugeGivesWholeAlignedHugePagesAndGivesThemBack) {
  for (const bool noreserve : {false, true}) {
    const size_t bytes = 3 * kHugePageBytes + 12345;
    auto* p = static_cast<uint8_t*>(map_huge(bytes, noreserve));
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(aligned_2m(p));
    EXPECT_EQ(huge_page_round(bytes), 4 * kHugePageBytes);
    EXPECT_EQ(p[0], 0);  // zero until written
    p[0] = 1, p[huge_page_round(bytes) - 1] = 2;  // the rounded length is usable
    EXPECT_TRUE(mapped(p, huge_page_round(bytes)));
    unmap_huge(p, bytes);
    EXPECT_FALSE(mapped(p, 4096)) << "the memory is still mapped after unmap_huge";
    EXPECT_FALSE(mapped(p + huge_page_round(bytes) - 4096, 4096)) << "its last page is still mapped";
  }
}

TEST(HugePages, MapHugeOfNothingIsStillOneMappedPage) {
  auto* p = static_cast<uint8_t*>(map_huge(0));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(huge_page_round(0), kHugePageBytes);
  p[0] = 1;  // mapped, not a pointer into a released range
  EXPECT_TRUE(mapped(p, kHugePageBytes));
  unmap_huge(p, 0);
  EXPECT_FALSE(mapped(p, 4096));
}

TEST(HugePages, MapHugeRefusesALengthThatWouldWrap) {
  errno = 0;
  EXPECT_EQ(map_huge(static_cast<size_t>(-1) - kHugePageBytes), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(HugePages, SmallArraysAreOrdinaryAllocations) {
  HugePageVector<float> a(1000, 1.5f);
  HugePageVector<float> b = a;
  b.push_back(2.f);
  EXPECT_EQ(b.size(), 1001u);
  EXPECT_EQ(b[999], 1.5f);
  EXPECT_EQ(b[1000], 2.f);
}

// The kB of AnonHugePages in the mapping of /proc/self/smaps that holds p.
long anon_huge_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= addr && addr < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

TEST(HugePages, TheKernelGrantsHugePagesWhereItOffersThem) {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(mode, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "transparent huge pages are off on this kernel (" << (modes.empty() ? "no sysfs entry" : modes) << ")";
  HugePageVector<float> a(2 * kHugePageBytes / sizeof(float));
  for (size_t i = 0; i < a.size(); i += 1024) a[i] = 1.f;  // fault every page in
  const long kb = anon_huge_kb(a.data());
  ASSERT_GE(kb, 0) << "no mapping in /proc/self/smaps holds the array";
  EXPECT_GE(kb, 2048) << "THP modes: " << modes << "; the array's mapping has " << kb << " kB in huge pages";
}

}  // namespace
}  // namespace clover::runtime
