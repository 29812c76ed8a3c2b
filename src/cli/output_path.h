// The output files of `synth`, `patch` and `logits`: an existing OUT must be a regular file.
// The writers build a temporary file and rename it over OUT, which replaces whatever OUT named:
// a FIFO, a socket or a device node (as root, OUT=/dev/null replaced the system's /dev/null).
#pragma once
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "clover/clover.h"

namespace clover::cli {

// Throws when `path` exists (following symlinks) and is not a regular file.
inline void check_output_path(const std::string& path, const char* what = "OUT") {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return;  // absent (or unreadable: the writer reports that)
  if (S_ISREG(st.st_mode)) return;
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  throw Error(std::string(what) + " " + path + " exists and is " + kind + "; give the path of a regular file");
}

}  // namespace clover::cli
