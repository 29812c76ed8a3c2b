// Command-line flags of the plain C++ benchmarks in bench/: "--name VALUE" pairs of integers after
// the positional arguments. An unknown flag, a missing value or a value that is not an integer is
// an error named on stderr (the caller prints its usage and exits 2).
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

namespace clover::bench {

inline bool parse_int_flags(int argc, char** argv, int first, std::initializer_list<std::pair<const char*, int*>> flags) {
  for (int i = first; i < argc; i += 2) {
    int* target = nullptr;
    for (const auto& [name, dst] : flags)
      if (!std::strcmp(argv[i], name)) target = dst;
    if (!target) {
      std::fprintf(stderr, "error: unknown option %s\n", argv[i]);
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: %s needs a value\n", argv[i]);
      return false;
    }
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(argv[i + 1], &end, 10);
    if (errno || end == argv[i + 1] || *end || v < -(1L << 30) || v > (1L << 30)) {
      std::fprintf(stderr, "error: %s takes an integer, not '%s'\n", argv[i], argv[i + 1]);
      return false;
    }
    *target = static_cast<int>(v);
  }
  return true;
}

}  // namespace clover::bench
