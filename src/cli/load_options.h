// How the model's weights come into memory, shared by every command that loads a model (`run`,
// `logits`, `bench`, `serve`): --no-mmap, --no-repack and --mlock as llama.cpp spells them, and --prefault
// (docs/loading.md). The loading's progress goes to stderr.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "clover/clover.h"

namespace clover::cli {

struct LoadArgs {
  bool no_mmap = false;
  bool no_repack = false;
  bool mlock = false;
  std::string prefault = "background";
};

inline void add_load_options(CLI::App* c, LoadArgs& l) {
  c->add_flag("--no-mmap", l.no_mmap,
              "read the weights into memory (huge pages where available) instead of mapping the file; the file's page "
              "cache is released behind the read");
  c->add_flag("--no-repack", l.no_repack,
              "with --no-mmap on the CPU, keep the file's layout instead of repacking the Q4_0, Q4_K, IQ4_XS and Q5_K matrices "
              "in place for the AVX-512 kernels (same results either way; a mapped file is never repacked)");
  c->add_flag("--mlock", l.mlock, "lock the weights in memory at load (a refusal by RLIMIT_MEMLOCK is a warning)");
  c->add_option("--prefault", l.prefault,
                "bring the mapped weights into memory in order of use: background (a low-priority thread once the model "
                "is ready), wait (before the first token) or off")
      ->check(CLI::IsMember({"background", "wait", "off"}))
      ->capture_default_str();
}

inline Prefault prefault_from_name(const std::string& s) {
  return s == "off" ? Prefault::Off : s == "wait" ? Prefault::Wait : Prefault::Background;
}

inline void apply_load_options(const LoadArgs& l, EngineOptions& eo, const std::string& progress_prefix = "") {
  eo.mmap = !l.no_mmap;
  eo.repack = !l.no_repack;
  eo.mlock = l.mlock;
  eo.prefault = prefault_from_name(l.prefault);
  // These commands write their answer (and --show-blocks its drawing) once the model is loaded: a
  // line from the background pre-fault's thread would land in the middle of it, so only what the
  // loading thread reports is shown (a background pre-fault's progress: `serve`'s log, /health).
  ProgressFn shown = stderr_progress(progress_prefix);
  const bool background = eo.prefault == Prefault::Background;
  eo.on_progress = [shown, background](std::string_view label, uint64_t done, uint64_t total) {
    if (!(background && label == "prefault")) shown(label, done, total);
  };
}

}  // namespace clover::cli
