// clover patch: the official Clover GGUF -> a file llama.cpp loads (src/patch, docs/patch.md).
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fmt/format.h>
#include <string>

#include "cli/commands.h"
#include "cli/output_path.h"
#include "patch/patch.h"

namespace clover::cli {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", b / 1048576.0); }

void print_plan(const patch::PatchPlan& p) {
  std::printf("in:      %s (%s)\n", p.in_path.c_str(), model::layout_name(p.in_layout));
  std::printf("out:     %s (target %s, %s)\n", p.out_path.c_str(), patch::target_name(p.options.target), mib(p.out_size).c_str());
  for (const auto& [from, to] : p.renamed_keys) std::printf("rename:  %s -> %s\n", from.c_str(), to.c_str());
  for (const auto& k : p.added_keys) std::printf("add key: %s\n", k.c_str());
  for (const auto& t : p.dropped_tensors) std::printf("drop:    %s\n", t.c_str());
  for (const auto& t : p.rewritten_tensors) std::printf("rewrite: %s  A_log -> -exp(A_log)\n", t.c_str());
  std::printf("copy:    %zu tensors byte for byte (%s); drop %zu (%s), rewrite %zu, rename %zu keys, add %zu\n",
              p.tensors.size() - p.dropped_tensors.size() - p.rewritten_tensors.size(), mib(p.copied_bytes).c_str(),
              p.dropped_tensors.size(), mib(p.dropped_bytes).c_str(), p.rewritten_tensors.size(), p.renamed_keys.size(),
              p.added_keys.size());
  for (const auto& w : p.warnings) std::printf("warning: %s\n", w.c_str());
}

}  // namespace

Runner add_patch_command(CLI::App& app) {
  struct Args {
    std::string in, out, target = "qwen35moe", copy = "auto";
    bool keep_rev = false, dry_run = false, quiet = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "patch",
      "turn the official Clover GGUF into a file llama.cpp loads: add clover_moe.expert_shared_count, drop the "
      "ssm_rev_* tensors, rewrite ssm_a to -exp(A_log); every other tensor is copied byte for byte, OUT appears "
      "only when complete");
  c->add_option("in", a->in, "official Clover GGUF (or llama-clover, for --target qwen35moe)")->required();
  c->add_option("out", a->out, "file to write (replaced atomically if it exists; never IN)")->required();
  c->add_option("--target", a->target,
                "qwen35moe (default): architecture and keys renamed, loads in released llama.cpp v0.5.0 and later; "
                "llama-clover: architecture clover_moe, as llama.cpp v0.9.0 loads it")
      ->check(CLI::IsMember({"llama-clover", "qwen35moe"}));
  c->add_flag("--keep-diffusion-tensors", a->keep_rev,
              "keep the ssm_rev_* tensors (the reverse in-block GDN path of diffusion mode). llama.cpp REFUSES such a "
              "file (\"wrong number of tensors\"), and so does this engine's loader today (neither layout); for tools "
              "that want the other two fixes only");
  c->add_option("--copy", a->copy,
                "how tensor bytes are copied: auto (copy_file_range on NFS/SMB/Ceph, where the server copies; "
                "read/write with a 1 MiB buffer elsewhere), kernel (copy_file_range), read-write")
      ->check(CLI::IsMember({"auto", "kernel", "read-write"}));
  c->add_flag("--dry-run", a->dry_run, "list what would change; write nothing");
  c->add_flag("-q,--quiet", a->quiet, "no progress bar");
  return [a] {
    check_output_path(a->out);
    patch::PatchOptions opts;
    opts.target = *patch::target_from_name(a->target);
    opts.keep_diffusion_tensors = a->keep_rev;
    opts.copy = a->copy == "kernel"       ? patch::PatchOptions::Copy::Kernel
                : a->copy == "read-write" ? patch::PatchOptions::Copy::ReadWrite
                                          : patch::PatchOptions::Copy::Auto;
    const patch::PatchPlan plan = patch::plan_patch(a->in, a->out, opts);
    if (a->dry_run) {
      print_plan(plan);
      std::printf("dry run: nothing written\n");
      return 0;
    }
    for (const auto& w : plan.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());

    // Ctrl-C ends the patch through the progress callback, so the temporary file is removed.
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    const bool bar = !a->quiet && isatty(STDERR_FILENO);
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    const patch::PatchResult res = patch::run_patch(plan, [&](uint64_t done, uint64_t total) {
      if (g_interrupted) throw patch::PatchError("interrupted; " + a->out + " was not written");
      const auto now = std::chrono::steady_clock::now();
      if (!bar || (now - last < std::chrono::milliseconds(100) && done < total)) return;
      last = now;
      const double secs = std::chrono::duration<double>(now - t0).count();
      const int width = 30, filled = total ? static_cast<int>(width * static_cast<double>(done) / total) : width;
      std::fprintf(stderr, "\rpatch: [%s%s] %3d%%  %.0f / %.0f MiB  %.0f MiB/s ", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), total ? static_cast<int>(100.0 * done / total) : 100,
                   done / 1048576.0, total / 1048576.0, secs > 0 ? done / 1048576.0 / secs : 0.0);
    });
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (bar) std::fprintf(stderr, "\n");
    if (!a->quiet)
      std::fprintf(stderr,
                   "patch: wrote %s (%s, target %s) in %.2f s, %.0f MiB/s (%s): dropped %zu tensors, rewrote %zu, "
                   "renamed %zu keys, added %zu\n",
                   a->out.c_str(), mib(res.bytes_written).c_str(), patch::target_name(opts.target), res.seconds,
                   res.seconds > 0 ? res.bytes_written / 1048576.0 / res.seconds : 0.0,
                   res.bytes_copied_in_kernel ? "copy_file_range" : "read/write", plan.dropped_tensors.size(),
                   plan.rewritten_tensors.size(), plan.renamed_keys.size(), plan.added_keys.size());
    return 0;
  };
}

}  // namespace clover::cli
