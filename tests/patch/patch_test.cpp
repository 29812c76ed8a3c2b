// clover patch: OUT's bytes, keys and layout; refusals; atomicity (tests/patch).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "model/model_test_util.h"
#include "patch/patch.h"

namespace clover {
namespace {

namespace fs = std::filesystem;
using patch::PatchError;
using patch::PatchOptions;
using patch::Target;
using testing::TempDir;

uint64_t fnv1a(const uint8_t* p, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::map<std::string, uint64_t> checksums(const gguf::Reader& r) {
  std::map<std::string, uint64_t> m;
  for (const auto& t : r.tensors()) m[t.name] = fnv1a(t.data, t.size);
  return m;
}

synth::SynthConfig tiny(model::Layout layout, DType type = DType::F32) {
  synth::SynthConfig c = synth::preset("tiny");
  c.layout = layout;
  c.type = type;
  return c;
}

bool same_value(const gguf::Value& a, const gguf::Value& b) {
  if (a.type != b.type || a.elem_type != b.elem_type || a.v.index() != b.v.index()) return false;
  if (const auto* xs = std::get_if<std::vector<gguf::Value>>(&a.v)) {
    const auto& ys = std::get<std::vector<gguf::Value>>(b.v);
    if (xs->size() != ys.size()) return false;
    for (size_t i = 0; i < xs->size(); ++i)
      if (!same_value((*xs)[i], ys[i])) return false;
    return true;
  }
  if (const auto* x = std::get_if<uint64_t>(&a.v)) return *x == std::get<uint64_t>(b.v);
  if (const auto* x = std::get_if<int64_t>(&a.v)) return *x == std::get<int64_t>(b.v);
  if (const auto* x = std::get_if<double>(&a.v)) return *x == std::get<double>(b.v);
  if (const auto* x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v);
  return std::get<std::string>(a.v) == std::get<std::string>(b.v);
}

std::set<std::string> dir_entries(const fs::path& dir) {
  std::set<std::string> s;
  for (const auto& e : fs::directory_iterator(dir)) s.insert(e.path().filename().string());
  return s;
}

std::string patch_file(const std::string& in, const std::string& out, PatchOptions o = {}) {
  patch::run_patch(patch::plan_patch(in, out, o));
  return out;
}

// Expects `f` to throw PatchError whose message contains `part`.
template <typename F>
void expect_refusal(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no refusal; expected one mentioning '" << part << "'";
  } catch (const PatchError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// The whole contract on one IN/OUT pair: every tensor other than ssm_a byte-identical, ssm_a equal
// to -exp(A_log), the ssm_rev_* tensors gone (or kept), the keys renamed and added.
void check_patched(const std::string& in_path, const std::string& out_path, Target target, bool kept_rev = false) {
  auto in = gguf::Reader::open(in_path);
  auto out = gguf::Reader::open(out_path);
  const auto in_sums = checksums(*in), out_sums = checksums(*out);
  EXPECT_EQ(out->alignment(), in->alignment());
  EXPECT_EQ(out->version(), in->version());

  int n_rev = 0, n_a = 0;
  for (const auto& t : in->tensors()) {
    const bool rev = t.name.find(".ssm_rev_") != std::string::npos;
    n_rev += rev;
    const gguf::TensorInfo* o = out->tensor(t.name);
    if (rev && !kept_rev) {
      EXPECT_EQ(o, nullptr) << t.name << " should be dropped";
      continue;
    }
    ASSERT_NE(o, nullptr) << t.name << " missing from OUT";
    EXPECT_EQ(o->dims, t.dims) << t.name;
    EXPECT_EQ(o->type, t.type) << t.name;
    if (t.name.size() > 6 && t.name.substr(t.name.size() - 6) == ".ssm_a") {
      ++n_a;
      ASSERT_EQ(t.type, DType::F32);
      const auto* a_log = reinterpret_cast<const float*>(t.data);
      const auto* a = reinterpret_cast<const float*>(o->data);
      for (int64_t i = 0; i < t.n_elements(); ++i) {
        EXPECT_EQ(a[i], -std::exp(a_log[i])) << t.name << "[" << i << "]";
        EXPECT_LT(a[i], 0.f);
      }
    } else {
      EXPECT_EQ(out_sums.at(t.name), in_sums.at(t.name)) << t.name << " bytes differ";
    }
  }
  EXPECT_GT(n_rev, 0);
  EXPECT_GT(n_a, 0);
  EXPECT_EQ(out->tensors().size(), in->tensors().size() - (kept_rev ? 0 : n_rev));

  // Keys: the same values, under the new prefix for qwen35moe; expert_shared_count = 1 added.
  const std::string to = target == Target::Qwen35Moe ? "qwen35moe." : "clover_moe.";
  EXPECT_EQ(out->get_str("general.architecture"), target == Target::Qwen35Moe ? "qwen35moe" : "clover_moe");
  EXPECT_EQ(out->get_u32(to + "expert_shared_count"), 1u);
  EXPECT_EQ(out->metadata().size(), in->metadata().size() + 1);
  for (const auto& [key, v] : in->metadata()) {
    if (key == "general.architecture") continue;
    const std::string k = key.rfind("clover_moe.", 0) == 0 ? to + key.substr(11) : key;
    const gguf::Value* ov = out->find(k);
    ASSERT_NE(ov, nullptr) << k << " missing from OUT";
    EXPECT_EQ(ov->type, v.type) << k;
    EXPECT_TRUE(same_value(*ov, v)) << k << " value differs";
  }
  if (target == Target::Qwen35Moe) {
    for (const auto& [key, v] : out->metadata()) EXPECT_NE(key.rfind("clover_moe.", 0), 0u) << key << " kept the old prefix";
  }
  EXPECT_TRUE(out->has(to + "diffusion.block_size"));
}

model::Layout layout_of(const std::string& path) {
  auto r = gguf::Reader::open(path);
  std::vector<std::string> warnings;
  return model::read_hparams(*r, warnings).layout;
}

TEST(Patch, OfficialToQwen35MoeKeepsEveryOtherByte) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  const auto plan = patch::plan_patch(in, d.file("out.gguf"), {});
  EXPECT_EQ(plan.in_layout, model::Layout::Official);
  EXPECT_EQ(plan.dropped_tensors.size(), 4u * 3);  // tiny: LLLF, 3 GDN layers
  EXPECT_EQ(plan.rewritten_tensors.size(), 3u);
  EXPECT_EQ(plan.added_keys.size(), 1u);
  EXPECT_FALSE(fs::exists(d.file("out.gguf"))) << "planning writes nothing";
  const auto res = patch::run_patch(plan);
  EXPECT_EQ(res.bytes_written, fs::file_size(d.file("out.gguf")));
  check_patched(in, d.file("out.gguf"), Target::Qwen35Moe);
  EXPECT_EQ(layout_of(d.file("out.gguf")), model::Layout::Qwen35Moe);
  EXPECT_EQ(dir_entries(d.path), (std::set<std::string>{"official.gguf", "out.gguf"}));
}

TEST(Patch, CopyFileRangePath) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official, DType::Q8_0));
  PatchOptions o;
  o.copy = PatchOptions::Copy::Kernel;
  const auto res = patch::run_patch(patch::plan_patch(in, d.file("out.gguf"), o));
  EXPECT_GT(res.bytes_copied_in_kernel, 0u) << "copy_file_range was not used (does this filesystem lack it?)";
  check_patched(in, d.file("out.gguf"), Target::Qwen35Moe);
}

TEST(Patch, OfficialToLlamaClover) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  PatchOptions o;
  o.target = Target::LlamaClover;
  patch_file(in, d.file("out.gguf"), o);
  check_patched(in, d.file("out.gguf"), Target::LlamaClover);
  EXPECT_EQ(layout_of(d.file("out.gguf")), model::Layout::LlamaClover);
}

// The same seed written directly in the target layout has exactly the patched tensor data.
TEST(Patch, TensorDataEqualsSynthInTargetLayout) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  for (auto [target, layout] : {std::pair{Target::Qwen35Moe, model::Layout::Qwen35Moe},
                                std::pair{Target::LlamaClover, model::Layout::LlamaClover}}) {
    PatchOptions o;
    o.target = target;
    const std::string out = patch_file(in, d.file("out.gguf"), o);
    const std::string direct = testing::write_synth(d, "direct.gguf", tiny(layout));
    auto a = gguf::Reader::open(out), b = gguf::Reader::open(direct);
    EXPECT_EQ(checksums(*a), checksums(*b)) << patch::target_name(target);
  }
}

TEST(Patch, Q8ThroughReadWriteAndNamedTemp) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official, DType::Q8_0));
  PatchOptions o;
  o.copy = PatchOptions::Copy::ReadWrite;
  o.anonymous_temp = false;
  const auto res = patch::run_patch(patch::plan_patch(in, d.file("out.gguf"), o));
  EXPECT_EQ(res.bytes_copied_in_kernel, 0u);
  check_patched(in, d.file("out.gguf"), Target::Qwen35Moe);
  EXPECT_EQ(dir_entries(d.path), (std::set<std::string>{"official.gguf", "out.gguf"}));
}

TEST(Patch, KeepDiffusionTensors) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  PatchOptions o;
  o.keep_diffusion_tensors = true;
  const auto plan = patch::plan_patch(in, d.file("out.gguf"), o);
  EXPECT_TRUE(plan.dropped_tensors.empty());
  EXPECT_FALSE(plan.warnings.empty());  // says llama.cpp refuses the result
  patch::run_patch(plan);
  check_patched(in, d.file("out.gguf"), Target::Qwen35Moe, /*kept_rev=*/true);
}

TEST(Patch, LlamaCloverToQwen35MoeOnlyRenames) {
  TempDir d;
  const std::string in = testing::write_synth(d, "lc.gguf", tiny(model::Layout::LlamaClover));
  const auto plan = patch::plan_patch(in, d.file("out.gguf"), {});
  EXPECT_TRUE(plan.dropped_tensors.empty());
  EXPECT_TRUE(plan.rewritten_tensors.empty());
  EXPECT_TRUE(plan.added_keys.empty());
  EXPECT_FALSE(plan.renamed_keys.empty());
  patch::run_patch(plan);
  auto a = gguf::Reader::open(in), b = gguf::Reader::open(d.file("out.gguf"));
  EXPECT_EQ(checksums(*a), checksums(*b));
  EXPECT_EQ(layout_of(d.file("out.gguf")), model::Layout::Qwen35Moe);
}

TEST(Patch, ProgressIsMonotonicAndEndsAtTotal) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  uint64_t last = 0, total = 0;
  int calls = 0;
  patch::run_patch(patch::plan_patch(in, d.file("out.gguf"), {}), [&](uint64_t done, uint64_t t) {
    EXPECT_GE(done, last);
    EXPECT_LE(done, t);
    last = done, total = t, ++calls;
  });
  EXPECT_GT(calls, 2);
  EXPECT_EQ(last, total);
  EXPECT_GT(total, 0u);
}

TEST(Patch, ReplacesAnExistingOut) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  std::ofstream(d.file("out.gguf")) << "old contents";
  patch_file(in, d.file("out.gguf"));
  check_patched(in, d.file("out.gguf"), Target::Qwen35Moe);
}

// A patch that fails part-way (here: the progress callback throws, as Ctrl-C does in the CLI)
// leaves no OUT, no temporary file, and an existing OUT untouched.
TEST(Patch, InterruptedPatchLeavesNothing) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  for (bool anonymous : {true, false})
    for (bool existing_out : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "anonymous_temp " << anonymous << ", existing OUT " << existing_out);
      if (existing_out) std::ofstream(d.file("out.gguf")) << "old contents";
      PatchOptions o;
      o.anonymous_temp = anonymous;
      const auto plan = patch::plan_patch(in, d.file("out.gguf"), o);
      int calls = 0;
      uint64_t at = 0;
      EXPECT_THROW(patch::run_patch(plan,
                                    [&](uint64_t done, uint64_t total) {
                                      if (++calls == 2) {
                                        at = done;
                                        throw PatchError("interrupted");
                                      }
                                    }),
                   PatchError);
      EXPECT_GT(at, 0u);
      EXPECT_LT(at, plan.out_size);
      if (existing_out) {
        std::ifstream f(d.file("out.gguf"));
        std::string s((std::istreambuf_iterator<char>(f)), {});
        EXPECT_EQ(s, "old contents");
        fs::remove(d.file("out.gguf"));
      }
      EXPECT_EQ(dir_entries(d.path), (std::set<std::string>{"official.gguf"}));
    }
}

TEST(PatchRefuses, AlreadyPatched) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  const std::string q = patch_file(in, d.file("q.gguf"));
  expect_refusal([&] { patch::plan_patch(q, d.file("qq.gguf"), {}); }, "already a qwen35moe file");
  PatchOptions lc;
  lc.target = Target::LlamaClover;
  const std::string l = patch_file(in, d.file("l.gguf"), lc);
  expect_refusal([&] { patch::plan_patch(l, d.file("ll.gguf"), lc); }, "already patched");
  expect_refusal([&] { patch::plan_patch(q, d.file("ql.gguf"), lc); }, "already a qwen35moe file");
}

TEST(PatchRefuses, UnknownLayout) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  // Official tensors plus the llama.cpp key: neither layout.
  testing::FileEdit e;
  e.add_kv.emplace_back("clover_moe.expert_shared_count", gguf::Value::u32(1));
  testing::rewrite(in, d.file("mixed.gguf"), e);
  expect_refusal([&] { patch::plan_patch(d.file("mixed.gguf"), d.file("out.gguf"), {}); }, "unknown layout");
  // Another architecture.
  testing::FileEdit arch;
  arch.kv = [](std::string& k, gguf::Value& v) {
    if (k == "general.architecture") v = gguf::Value::str("llama");
    return true;
  };
  testing::rewrite(in, d.file("llama.gguf"), arch);
  expect_refusal([&] { patch::plan_patch(d.file("llama.gguf"), d.file("out.gguf"), {}); }, "unknown layout");
  // Not a GGUF at all.
  std::ofstream(d.file("junk.gguf")) << "this is not a gguf file";
  expect_refusal([&] { patch::plan_patch(d.file("junk.gguf"), d.file("out.gguf"), {}); }, "cannot read IN");
  EXPECT_FALSE(fs::exists(d.file("out.gguf")));
}

TEST(PatchRefuses, OutIsIn) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  expect_refusal([&] { patch::plan_patch(in, in, {}); }, "is the input file");
  fs::create_symlink(in, d.file("sym.gguf"));
  expect_refusal([&] { patch::plan_patch(in, d.file("sym.gguf"), {}); }, "is the input file");
  fs::create_hard_link(in, d.file("hard.gguf"));
  expect_refusal([&] { patch::plan_patch(in, d.file("hard.gguf"), {}); }, "is the input file");
  expect_refusal([&] { patch::plan_patch(in, d.path.string() + "/./official.gguf", {}); }, "is the input file");
}

TEST(PatchRefuses, OutInMissingDirectoryOrADirectory) {
  TempDir d;
  const std::string in = testing::write_synth(d, "official.gguf", tiny(model::Layout::Official));
  expect_refusal([&] { patch::plan_patch(in, d.file("no/such/dir/out.gguf"), {}); }, "does not exist");
  fs::create_directory(d.file("sub"));
  expect_refusal([&] { patch::plan_patch(in, d.file("sub"), {}); }, "is a directory");
}

TEST(PatchRefuses, NotEnoughDiskSpace) {
  TempDir d;
  expect_refusal([&] { patch::require_free_space(d.path.string(), uint64_t{1} << 62); }, "not enough disk space");
  EXPECT_NO_THROW(patch::require_free_space(d.path.string(), 1));
}

TEST(PatchTarget, Names) {
  EXPECT_EQ(patch::target_from_name("qwen35moe"), Target::Qwen35Moe);
  EXPECT_EQ(patch::target_from_name("llama-clover"), Target::LlamaClover);
  EXPECT_FALSE(patch::target_from_name("official").has_value());
}

}  // namespace
}  // namespace clover
