// `clover patch`: turns the official Clover GGUF into a file llama.cpp loads (CLOVER-SPEC 3.2).
//
// The official file differs from llama.cpp's form in three ways: the key
// `clover_moe.expert_shared_count` is missing, 4 `ssm_rev_*` tensors per GDN layer are extra, and
// `ssm_a` holds A_log instead of -exp(A_log). A patch adds the key, drops the tensors and rewrites
// `ssm_a`; with target qwen35moe it also renames the architecture and its key prefix. Every other
// tensor's bytes are copied unchanged (large sequential I/O; copy_file_range where it copies on the
// server side), and OUT only appears, complete and checked, when the patch succeeds.
//
// Two steps: plan_patch() reads IN and decides everything (what changes, OUT's metadata and tensor
// table, refusals); run_patch() writes OUT from the plan. `clover patch --dry-run` is the first alone.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "model/hparams.h"

namespace clover::patch {

// Every refusal and every failure: the message names the file and the problem.
struct PatchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Target {
  LlamaClover,  // keep architecture clover_moe: what llama.cpp v0.9.0 loads
  Qwen35Moe,    // rename to qwen35moe: what released llama.cpp (v0.5.0 and later) loads
};
const char* target_name(Target t);  // "llama-clover", "qwen35moe"
std::optional<Target> target_from_name(std::string_view s);

struct PatchOptions {
  Target target = Target::Qwen35Moe;
  // Keep the ssm_rev_* tensors (byte for byte). llama.cpp refuses a file with extra tensors.
  bool keep_diffusion_tensors = false;
  // How tensor bytes are copied. Kernel: copy_file_range (falling back to read/write where the
  // kernel or filesystem refuses it); ReadWrite: read/write through a 1 MiB buffer; Auto: Kernel
  // on filesystems that copy on the server side (NFS, SMB, Ceph), ReadWrite elsewhere (faster
  // than the kernel's generic splice copy on ext4: docs/patch.md).
  enum class Copy { Auto, Kernel, ReadWrite } copy = Copy::Auto;
  // Build OUT in an unnamed O_TMPFILE (nothing left even after SIGKILL) where the filesystem has
  // it; false: always in a named temporary file next to OUT, removed on failure.
  bool anonymous_temp = true;
};

// What becomes of one tensor of IN.
enum class TensorAction { Copy, Drop, NegExp };  // NegExp: F32 values x -> -exp(x)

struct PlannedTensor {
  const gguf::TensorInfo* in = nullptr;  // into PatchPlan::reader
  TensorAction action = TensorAction::Copy;
  uint64_t out_offset = 0;  // in OUT's data section (Drop: unused)
};

struct PatchPlan {
  std::string in_path, out_path;
  std::shared_ptr<const gguf::Reader> reader;  // IN, mapped
  model::Layout in_layout = model::Layout::Official;
  PatchOptions options;

  // OUT: metadata in order (IN's order; renamed keys keep their place, added keys come last),
  // tensors in IN's table order, data packed in that order at IN's alignment.
  std::vector<std::pair<std::string, gguf::Value>> metadata;
  std::vector<PlannedTensor> tensors;  // every tensor of IN, dropped ones included
  uint32_t version = 3;
  uint64_t alignment = 32;
  uint64_t out_data_offset = 0;  // file offset of OUT's data section
  uint64_t out_size = 0;         // bytes of OUT

  // The changes, for people (`--dry-run`, the summary).
  std::string arch_from, arch_to;
  std::vector<std::pair<std::string, std::string>> renamed_keys;  // old name, new name
  std::vector<std::string> added_keys;                            // "name = value"
  std::vector<std::string> dropped_tensors, rewritten_tensors;
  uint64_t copied_bytes = 0;   // tensor bytes copied unchanged
  uint64_t dropped_bytes = 0;
  std::vector<std::string> warnings;

  bool changes_architecture() const { return arch_from != arch_to; }
};

// Reads IN and plans the patch. Refuses (PatchError): IN unreadable or not a Clover-family GGUF,
// a layout the target cannot come from (unknown, or already patched for this target), OUT that is
// IN (compared by device and inode, so symlinks and hard links count), OUT that is a directory or
// in a directory that does not exist, an ssm_a that is not F32.
PatchPlan plan_patch(const std::string& in_path, const std::string& out_path, const PatchOptions& opts = {});

// Throws PatchError unless the filesystem holding `dir` has `bytes` free for this user (statvfs).
void require_free_space(const std::string& dir, uint64_t bytes);

// Progress of run_patch: tensor bytes written so far, of the total. Called often (every few tens
// of MiB) and at the end. Throwing from it aborts the patch: no OUT, no temporary file.
using ProgressFn = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;

struct PatchResult {
  uint64_t bytes_written = 0;         // OUT's size
  uint64_t bytes_copied_in_kernel = 0;  // of them, by copy_file_range (0: read/write only)
  double seconds = 0;                 // wall time of run_patch, fsync included
};

// Writes OUT from the plan: header, then each tensor (copied, or rewritten), fsync, a check that
// OUT parses as the planned GGUF, then an atomic rename onto OUT. Checks free space first. On any
// failure (a throwing progress callback included) OUT is left as it was before and no temporary
// file remains.
PatchResult run_patch(const PatchPlan& plan, const ProgressFn& progress = {});

}  // namespace clover::patch
