#include "runtime/memory_stats.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace clover {
namespace {
int64_t read_status_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  int64_t kb = 0;
  size_t klen = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, klen) == 0 && line[klen] == ':') {
      kb = std::strtoll(line + klen + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb;
}
}  // namespace

int64_t peak_rss_bytes() { return read_status_kb("VmHWM") * 1024; }
int64_t current_rss_bytes() { return read_status_kb("VmRSS") * 1024; }
}  // namespace clover
