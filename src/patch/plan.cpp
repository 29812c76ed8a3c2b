// Planning a patch: what IN is, what OUT will hold, and every refusal, before a byte is written.
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "patch/header.h"
#include "patch/patch.h"

namespace clover::patch {

namespace {

constexpr std::string_view kOfficialArch = "clover_moe";
constexpr std::string_view kQwenArch = "qwen35moe";

[[noreturn]] void refuse(const std::string& msg) { throw PatchError(msg); }

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

bool is_reverse_path_tensor(const std::string& name) { return name.find(".ssm_rev_") != std::string::npos; }
bool is_ssm_a(const std::string& name) {
  return name.size() > 6 && name.compare(name.size() - 6, 6, ".ssm_a") == 0 && name.rfind("blk.", 0) == 0;
}

// OUT must not be IN (by identity, not by name), must not be a directory, and must be in a
// directory that exists.
void check_out_path(const std::string& in_path, const std::string& out_path) {
  if (out_path.empty()) refuse("OUT is empty");
  struct stat in_st {};
  if (::stat(in_path.c_str(), &in_st) != 0) refuse(fmt::format("cannot stat {}: {}", in_path, std::strerror(errno)));
  const std::string dir = parent_dir(out_path);
  struct stat dir_st {};
  if (::stat(dir.c_str(), &dir_st) != 0)
    refuse(fmt::format("OUT {} is in a directory that does not exist or cannot be reached: {} ({})", out_path, dir,
                       std::strerror(errno)));
  if (!S_ISDIR(dir_st.st_mode)) refuse(fmt::format("OUT {}: {} is not a directory", out_path, dir));
  struct stat out_st {};
  if (::stat(out_path.c_str(), &out_st) == 0) {
    if (out_st.st_dev == in_st.st_dev && out_st.st_ino == in_st.st_ino)
      refuse(fmt::format("OUT {} is the input file {} (same file, through a link or the same name); "
                         "a patch never writes over its input",
                         out_path, in_path));
    if (S_ISDIR(out_st.st_mode)) refuse(fmt::format("OUT {} is a directory; give a file name", out_path));
  }
}

// Which layouts each target accepts as input.
void check_layout(model::Layout in, Target target, const std::string& in_path) {
  using model::Layout;
  if (in == Layout::Qwen35Moe)
    refuse(fmt::format("{} is already a qwen35moe file: nothing to patch", in_path));
  if (in == Layout::LlamaClover && target == Target::LlamaClover)
    refuse(fmt::format("{} is already patched for llama.cpp (layout llama-clover: has clover_moe.expert_shared_count, "
                       "no ssm_rev_* tensors); use --target qwen35moe to rename it for released llama.cpp",
                       in_path));
}

}  // namespace

const char* target_name(Target t) { return t == Target::LlamaClover ? "llama-clover" : "qwen35moe"; }

std::optional<Target> target_from_name(std::string_view s) {
  if (s == "llama-clover") return Target::LlamaClover;
  if (s == "qwen35moe") return Target::Qwen35Moe;
  return std::nullopt;
}

void require_free_space(const std::string& dir, uint64_t bytes) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) refuse(fmt::format("cannot statvfs {}: {}", dir, std::strerror(errno)));
  const unsigned __int128 avail = static_cast<unsigned __int128>(vfs.f_bavail) * vfs.f_frsize;
  if (avail < bytes)
    refuse(fmt::format("not enough disk space in {}: OUT needs {:.2f} GiB, {:.2f} GiB free", dir, bytes / 1073741824.0,
                       static_cast<double>(avail) / 1073741824.0));
}

PatchPlan plan_patch(const std::string& in_path, const std::string& out_path, const PatchOptions& opts) {
  check_out_path(in_path, out_path);

  PatchPlan p;
  p.in_path = in_path;
  p.out_path = out_path;
  p.options = opts;
  try {
    p.reader = gguf::Reader::open(in_path);
  } catch (const gguf::GgufError& e) {
    refuse(fmt::format("cannot read IN: {}", e.what()));
  }
  const gguf::Reader& r = *p.reader;
  try {
    p.in_layout = model::read_hparams(r, p.warnings).layout;
  } catch (const model::ModelError& e) {
    refuse(fmt::format("{}: unknown layout, not a file `clover patch` can convert: {}", in_path, e.what()));
  } catch (const gguf::GgufError& e) {
    refuse(fmt::format("{}: unknown layout, not a file `clover patch` can convert: {}", in_path, e.what()));
  }
  check_layout(p.in_layout, opts.target, in_path);

  // Metadata: rename the architecture and its key prefix for qwen35moe; add expert_shared_count.
  p.arch_from = r.get_str("general.architecture");
  p.arch_to = opts.target == Target::Qwen35Moe ? std::string(kQwenArch) : std::string(kOfficialArch);
  const std::string from_prefix = p.arch_from + ".", to_prefix = p.arch_to + ".";
  for (const auto& [key, v] : r.metadata()) {
    if (key == "general.architecture") {
      p.metadata.emplace_back(key, gguf::Value::str(p.arch_to));
      if (p.changes_architecture()) p.renamed_keys.emplace_back(key + " = " + p.arch_from, key + " = " + p.arch_to);
    } else if (p.changes_architecture() && key.rfind(from_prefix, 0) == 0) {
      std::string renamed = to_prefix + key.substr(from_prefix.size());
      p.renamed_keys.emplace_back(key, renamed);
      p.metadata.emplace_back(std::move(renamed), v);
    } else {
      p.metadata.emplace_back(key, v);
    }
  }
  const std::string shared_key = to_prefix + "expert_shared_count";
  bool has_shared = false;
  for (const auto& kv : p.metadata) has_shared |= kv.first == shared_key;
  if (!has_shared) {
    // One shared expert (CLOVER-SPEC 1); the official file omits the key llama.cpp requires.
    p.metadata.emplace_back(shared_key, gguf::Value::u32(1));
    p.added_keys.push_back(shared_key + " = 1");
  }

  // Tensors: drop the reverse path, rewrite ssm_a (official files store A_log), copy the rest.
  const bool official = p.in_layout == model::Layout::Official;
  for (const gguf::TensorInfo& t : r.tensors()) {
    PlannedTensor pt;
    pt.in = &t;
    if (is_reverse_path_tensor(t.name) && !opts.keep_diffusion_tensors) {
      pt.action = TensorAction::Drop;
      p.dropped_tensors.push_back(t.name);
      p.dropped_bytes += t.size;
    } else if (official && is_ssm_a(t.name)) {
      if (t.type != DType::F32)
        refuse(fmt::format("{}: tensor '{}' is {}, expected F32 (llama.cpp reads ssm_a as F32)", in_path, t.name,
                           dtype_name(t.type)));
      pt.action = TensorAction::NegExp;
      p.rewritten_tensors.push_back(t.name);
    } else {
      p.copied_bytes += t.size;
    }
    p.tensors.push_back(pt);
  }
  if (official && p.rewritten_tensors.empty()) p.warnings.push_back("official file without any blk.N.ssm_a tensor");
  if (opts.keep_diffusion_tensors && official)
    p.warnings.push_back("--keep-diffusion-tensors: OUT keeps the ssm_rev_* tensors; llama.cpp refuses a file with "
                         "tensors it does not know, and clover.cpp's loader accepts no layout with both the key and "
                         "those tensors");

  // OUT's table: IN's order, packed at IN's alignment (llama.cpp requires each tensor to start
  // right after the previous one's padding).
  p.version = r.version();
  p.alignment = r.alignment();
  uint64_t off = 0;
  for (PlannedTensor& t : p.tensors) {
    if (t.action == TensorAction::Drop) continue;
    t.out_offset = off;
    off = align_up(off + t.in->size, p.alignment);
  }
  p.out_data_offset = align_up(detail::encode_header(p).size(), p.alignment);
  uint64_t last_end = 0;
  for (const PlannedTensor& t : p.tensors)
    if (t.action != TensorAction::Drop) last_end = t.out_offset + t.in->size;
  p.out_size = p.out_data_offset + align_up(last_end, p.alignment);
  return p;
}

}  // namespace clover::patch
