// Model loading: the three layouts, the official file's quirks, and clear errors for bad files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "model/model.h"
#include "model_test_util.h"

namespace clover {
namespace {

using testing::FileEdit;
using testing::TempDir;

synth::SynthConfig tiny(model::Layout layout) {
  synth::SynthConfig c = synth::preset("tiny");
  c.layout = layout;
  return c;
}

std::string load_error(const std::string& path) {
  try {
    model::Model::load(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ModelLoad, RecognisesTheThreeLayouts) {
  TempDir d;
  const std::pair<model::Layout, const char*> cases[] = {
      {model::Layout::Official, "clover_moe"}, {model::Layout::LlamaClover, "clover_moe"}, {model::Layout::Qwen35Moe, "qwen35moe"}};
  for (const auto& [layout, arch] : cases) {
    auto m = model::Model::load(testing::write_synth(d, std::string(arch) + std::to_string(int(layout)), tiny(layout)));
    EXPECT_EQ(m->hp().layout, layout);
    EXPECT_EQ(m->hp().arch, arch);
    EXPECT_EQ(m->hp().has_reverse_path, layout == model::Layout::Official);
    EXPECT_EQ(m->hp().n_layer, 4);
    EXPECT_EQ(m->hp().n_attn_layers(), 1);
    EXPECT_GE(m->hp().mask_token, 0);
    EXPECT_TRUE(m->warnings().empty()) << m->warnings()[0];
  }
}

TEST(ModelLoad, OfficialALogIsConvertedToTheSameDecayAsLlamaForm) {
  TempDir d;
  auto off = model::Model::load(testing::write_synth(d, "off.gguf", tiny(model::Layout::Official)));
  auto q = model::Model::load(testing::write_synth(d, "q.gguf", tiny(model::Layout::Qwen35Moe)));
  const auto& a = off->weights().layers[0].gdn;
  const auto& b = q->weights().layers[0].gdn;
  for (int h = 0; h < off->hp().gdn_v_heads; ++h) {
    EXPECT_LT(a.a[h], 0.f);
    EXPECT_EQ(a.a[h], b.a[h]) << "head " << h;
    EXPECT_LT(a.rev_a[h], 0.f);
  }
}

TEST(ModelLoad, WarnsWhenDecayValuesContradictTheLayout) {
  TempDir d;
  const std::string src = testing::write_synth(d, "q.gguf", tiny(model::Layout::Qwen35Moe));
  // A qwen35moe file that holds A_log (non-negative) instead of -exp(A_log).
  const std::string dst = d.file("alog.gguf");
  {
    auto r = gguf::Reader::open(src);
    gguf::Writer w(dst);
    for (const auto& [k, v] : r->metadata()) w.set(k, v);
    for (const auto& t : r->tensors()) w.add_tensor(t.name, t.dims, t.type);
    w.begin_data();
    for (const auto& t : r->tensors()) {
      std::vector<uint8_t> buf(t.data, t.data + t.size);
      if (t.name == "blk.0.ssm_a")
        for (size_t i = 0; i < t.size / 4; ++i) reinterpret_cast<float*>(buf.data())[i] = 1.0f;
      w.write_tensor_data(t.name, buf.data(), buf.size());
    }
    w.finish();
  }
  auto m = model::Model::load(dst);
  ASSERT_FALSE(m->warnings().empty());
  EXPECT_NE(m->warnings()[0].find("blk.0.ssm_a"), std::string::npos) << m->warnings()[0];
}

TEST(ModelLoad, ClearErrors) {
  TempDir d;
  const std::string off = testing::write_synth(d, "off.gguf", tiny(model::Layout::Official));
  const std::string q = testing::write_synth(d, "q.gguf", tiny(model::Layout::Qwen35Moe));
  struct Case {
    const char* what;
    std::string src;
    FileEdit edit;
    const char* expect;
  };
  std::vector<Case> cases;
  cases.push_back({"missing tensor", q, {.tensor = [](std::string& n, auto&) { return n != "blk.1.ssm_out.weight"; }},
                   "tensor 'blk.1.ssm_out.weight' not found"});
  cases.push_back({"wrong shape", q,
                   {.tensor = [](std::string& n, std::vector<int64_t>& dims) {
                      if (n == "blk.3.attn_k.weight") dims[1] = 64;
                      return true;
                    }},
                   "tensor 'blk.3.attn_k.weight' has shape {128, 64}, expected {128, 128}"});
  cases.push_back({"extra tensor", q, {.add_f32_tensors = {{"blk.0.surprise.weight", {128}}}}, "unexpected tensor(s)"});
  cases.push_back({"rev tensors in qwen35moe", q, {.add_f32_tensors = {{"blk.0.ssm_rev_a", {4}}}},
                   "qwen35moe file has ssm_rev_* tensors"});
  cases.push_back({"official with shared count key", off, {.add_kv = {{"clover_moe.expert_shared_count", gguf::Value::u32(1)}}},
                   "clover_moe file of unknown layout"});
  cases.push_back({"unknown architecture", q,
                   {.kv = [](std::string& k, gguf::Value& v) {
                      if (k == "general.architecture") v = gguf::Value::str("llama");
                      return true;
                    }},
                   "unsupported architecture 'llama'"});
  cases.push_back({"epsilon of the wrong type", q,
                   {.kv = [](std::string& k, gguf::Value& v) {
                      if (k == "qwen35moe.attention.layer_norm_rms_epsilon") v = gguf::Value::u32(1);
                      return true;
                    }},
                   "qwen35moe.attention.layer_norm_rms_epsilon"});
  cases.push_back({"missing rope sections", q, {.kv = [](std::string& k, gguf::Value&) { return k != "qwen35moe.rope.dimension_sections"; }},
                   "rope.dimension_sections"});
  cases.push_back({"inner size mismatch", q,
                   {.kv = [](std::string& k, gguf::Value& v) {
                      if (k == "qwen35moe.ssm.inner_size") v = gguf::Value::u32(100);
                      return true;
                    }},
                   "ssm.inner_size = 100"});
  cases.push_back({"experts used > experts", q,
                   {.kv = [](std::string& k, gguf::Value& v) {
                      if (k == "qwen35moe.expert_used_count") v = gguf::Value::u32(9);
                      return true;
                    }},
                   "expert_used_count 9 exceeds expert_count 8"});
  cases.push_back({"vocabulary vs embedding", q,
                   {.tensor = [](std::string& n, std::vector<int64_t>& dims) {
                      if (n == "token_embd.weight") dims[1] = 256;
                      return true;
                    }},
                   "token_embd.weight"});
  int i = 0;
  for (auto& c : cases) {
    const std::string dst = d.file("case" + std::to_string(i++) + ".gguf");
    testing::rewrite(c.src, dst, c.edit);
    const std::string err = load_error(dst);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": got '" << err << "'";
  }
}

// ---- load-time value checks (issue #26, item 11) ----

// Overwrites `bytes` at byte `at` of tensor `name`'s data in the file at `path`.
void poke(const std::string& path, const std::string& name, uint64_t at, const std::vector<uint8_t>& bytes) {
  uint64_t offset = 0;
  {
    auto r = gguf::Reader::open(path);
    const gguf::TensorInfo* t = r->tensor(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_LE(at + bytes.size(), t->size);
    offset = r->data_offset() + t->offset + at;
  }
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

std::vector<uint8_t> f32_bytes(float x) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &x, 4);
  return b;
}

TEST(ModelLoad, RefusesARopeBaseThatIsNotAPositiveNumber) {
  TempDir d;
  const std::string q = testing::write_synth(d, "q.gguf", tiny(model::Layout::Qwen35Moe));
  int i = 0;
  for (float bad : {0.f, -1.f, std::nanf(""), INFINITY}) {
    const std::string dst = d.file("rope" + std::to_string(i++) + ".gguf");
    testing::rewrite(q, dst, {.kv = [bad](std::string& k, gguf::Value& v) {
                                if (k == "qwen35moe.rope.freq_base") v = gguf::Value::f32(bad);
                                return true;
                              }});
    const std::string err = load_error(dst);
    EXPECT_NE(err.find("qwen35moe.rope.freq_base"), std::string::npos) << bad << ": got '" << err << "'";
  }
}

TEST(ModelLoad, RefusesNonFiniteWeights) {
  TempDir d;
  struct Case {
    const char* what;
    DType type;
    std::string tensor;
    uint64_t at;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  const std::vector<uint8_t> f16_inf = {0x00, 0x7C}, f16_nan = {0x01, 0x7E}, bf16_nan = {0xC1, 0x7F};
  const std::vector<Case> cases = {
      {"NaN in an F32 norm", DType::F32, "blk.2.attn_norm.weight", 4 * 17, f32_bytes(std::nanf("")), "element 17"},
      {"Inf in an F32 matrix", DType::F32, "blk.0.attn_qkv.weight", 4 * 1000, f32_bytes(-INFINITY), "element 1000"},
      {"Inf in an F16 matrix", DType::F16, "blk.3.attn_output.weight", 2 * 5, f16_inf, "element 5"},
      {"NaN in a BF16 matrix", DType::BF16, "blk.1.ssm_out.weight", 2 * 9, bf16_nan, "element 9"},
      {"NaN scale in a Q8_0 block", DType::Q8_0, "blk.0.attn_gate.weight", 34 * 3, f16_nan, "block 3"},
      {"Inf scale in a Q4_0 expert", DType::Q4_0, "blk.1.ffn_down_exps.weight", 18 * 7, f16_inf, "block 7"},
      {"NaN in the embedding", DType::F32, "token_embd.weight", 4 * 300, f32_bytes(std::nanf("")), "element 300"},
  };
  int i = 0;
  for (const Case& c : cases) {
    synth::SynthConfig cfg = tiny(model::Layout::Official);
    cfg.type = c.type;
    const std::string path = testing::write_synth(d, "w" + std::to_string(i++) + ".gguf", cfg);
    EXPECT_EQ(load_error(path), "") << c.what << ": the clean file must load";
    poke(path, c.tensor, c.at, c.bytes);
    const std::string err = load_error(path);
    EXPECT_NE(err.find("tensor '" + c.tensor + "' holds a non-finite value"), std::string::npos) << c.what << ": got '" << err << "'";
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": got '" << err << "'";
  }
  // A large finite value is not refused.
  synth::SynthConfig cfg = tiny(model::Layout::Official);
  const std::string big = testing::write_synth(d, "big.gguf", cfg);
  poke(big, "blk.2.attn_norm.weight", 0, f32_bytes(3e38f));
  EXPECT_EQ(load_error(big), "");
}

}  // namespace
}  // namespace clover
