// `clover bench` run as a process on tiny synthetic models: the records it prints (JSON and
// markdown), the invariants its figures must satisfy, and its refusals. No timing assertions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

#include "model/model_test_util.h"

namespace clover {
namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class BenchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    synth::SynthConfig c = synth::preset("tiny");
    c.type = DType::Q4_0;
    official_ = testing::write_synth(*dir_, "tiny-official.gguf", c);
    c.layout = model::Layout::Qwen35Moe;
    qwen_ = testing::write_synth(*dir_, "tiny-qwen.gguf", c);
  }
  static void TearDownTestSuite() { delete dir_; }

  static Result bench(const std::string& args) {
    const std::string exe = CLOVER_EXE;
    const std::string out = dir_->file("out.txt"), err = dir_->file("err.txt");
    const int status = std::system((exe + " bench " + args + " >" + out + " 2>" + err).c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out), r.err = slurp(err);
    return r;
  }
  static nlohmann::json bench_json(const std::string& args) {
    Result r = bench(args + " --json -q");
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::string official_, qwen_;
};

void expect_rates(const nlohmann::json& j, size_t reps) {
  ASSERT_TRUE(j.contains("samples_ts")) << j.dump();
  EXPECT_EQ(j["samples_ts"].size(), reps);
  for (double x : j["samples_ts"]) EXPECT_TRUE(std::isfinite(x) && x > 0) << j.dump();
  EXPECT_GT(j["avg_ts"].get<double>(), 0);
  EXPECT_GE(j["stddev_ts"].get<double>(), 0);
  EXPECT_GT(j["median_ts"].get<double>(), 0);
}

TEST_F(BenchCli, EveryCombinationOfPromptLengthsAndThreadsGetsARecord) {
  const nlohmann::json all = bench_json("-m " + qwen_ + " -p 16,40 -n 8 -t 1,2 -r 2");
  ASSERT_EQ(all.size(), 6u);  // 2 thread counts x (pp16, pp40, tg8)
  const std::vector<std::pair<int, std::string>> want = {{1, "pp16"}, {1, "pp40"}, {1, "tg8"}, {2, "pp16"}, {2, "pp40"}, {2, "tg8"}};
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& j = all[i];
    EXPECT_EQ(j["threads"], want[i].first);
    EXPECT_EQ(j["test"], want[i].second);
    EXPECT_EQ(j["model"], "tiny-qwen");
    EXPECT_EQ(j["layout"].get<std::string>().find("qwen35moe") != std::string::npos, true) << j["layout"];
    EXPECT_EQ(j["weight_type"], "Q4_0");
    EXPECT_EQ(j["size_bytes"].get<uint64_t>(), std::filesystem::file_size(qwen_));
    EXPECT_EQ(j["mode"], "ar");
    EXPECT_EQ(j["reps"], 2);
    EXPECT_GT(j["peak_rss_bytes"].get<int64_t>(), 1 << 20);
    expect_rates(j, 2);
    if (want[i].second[0] == 'p') {
      EXPECT_EQ(j["n_prompt"], want[i].second == "pp16" ? 16 : 40);
      EXPECT_GT(j["ttft_ms"].get<double>(), 0);
      EXPECT_EQ(j["ttft_ms_samples"].size(), 2u);
    } else {
      EXPECT_EQ(j["n_gen"], 8);
      EXPECT_DOUBLE_EQ(j["tokens_per_pass"].get<double>(), 1.0);  // AR: one token per pass, exactly
    }
  }
}

TEST_F(BenchCli, DiffusionAndSpecReportPassesPerBlockAndTheBlockPassCost) {
  const nlohmann::json all = bench_json("-m " + official_ + " -p 0 -n 40 --mode spec,ar,diffusion -t 1 -r 1");
  ASSERT_EQ(all.size(), 4u);  // tg40 in each mode, then block32
  EXPECT_EQ(all[0]["mode"], "ar");
  EXPECT_EQ(all[1]["mode"], "diffusion");
  EXPECT_EQ(all[2]["mode"], "spec");
  for (int i = 0; i < 3; ++i) expect_rates(all[i], 1);
  // Diffusion: a block of 32 takes 1..31 denoising passes plus its commit pass; 40 tokens make
  // one full block and one of 8.
  const auto& d = all[1];
  EXPECT_GE(d["passes_per_block"].get<double>(), 2.0);
  EXPECT_LE(d["passes_per_block"].get<double>(), 32.0);
  EXPECT_DOUBLE_EQ(d["tokens_per_block"].get<double>(), 20.0);
  EXPECT_GT(d["tokens_per_pass"].get<double>(), 0.0);
  // Spec: every cycle commits at least the verifier's own token, at most a block.
  const auto& s = all[2];
  EXPECT_GE(s["tokens_per_cycle"].get<double>(), 1.0);
  EXPECT_LE(s["tokens_per_cycle"].get<double>(), 32.0);
  EXPECT_GE(s["passes_per_block"].get<double>(), 2.0);

  const auto& b = all[3];
  EXPECT_EQ(b["test"], "block32");
  EXPECT_EQ(b["block_size"], 32);
  EXPECT_EQ(b["block_pass_logit_rows"], 31);  // the decoders' first pass: outputs 0..30 predict the masks
  EXPECT_GT(b["block_pass_ms"].get<double>(), 0);
  EXPECT_GT(b["ar_step_ms"].get<double>(), 0);
  EXPECT_NEAR(b["block_pass_vs_ar_step"].get<double>(), b["block_pass_ms"].get<double>() / b["ar_step_ms"].get<double>(), 1e-9);
  // One token routes to exactly k experts per layer; a block of 32 reads at least k, at most all.
  const synth::SynthConfig tiny = synth::preset("tiny");
  EXPECT_DOUBLE_EQ(b["experts_per_layer_ar"].get<double>(), tiny.n_expert_used);
  EXPECT_GE(b["experts_per_layer_block"].get<double>(), tiny.n_expert_used);
  EXPECT_LE(b["experts_per_layer_block"].get<double>(), tiny.n_expert);
}

TEST_F(BenchCli, DefaultOutputIsAMarkdownTable) {
  const Result r = bench("-m " + qwen_ + " -p 8 -n 4 -t 1 -r 2 -q");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| model | type | size | threads | mode | test | t/s | notes |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| pp8 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ± "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ttft"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak RSS"), std::string::npos) << r.out;
}

TEST_F(BenchCli, RefusesWhatItCannotMeasureWithAClearError) {
  Result r = bench("-m " + qwen_ + " -p 0 -n 4 --mode diffusion -r 1 -q");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("reverse in-block GDN path"), std::string::npos) << r.err;

  r = bench("-m " + qwen_ + " -p 12x -r 1 -q");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("-p: '12x' is not an integer"), std::string::npos) << r.err;

  r = bench("-m " + qwen_ + " -t 0 -r 1 -q");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("-t: '0'"), std::string::npos) << r.err;

  r = bench("-m " + dir_->file("missing.gguf") + " -q");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("model file not found"), std::string::npos) << r.err;

  r = bench("-m " + qwen_ + " -p 0 -n 0 -q");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("nothing to measure"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace clover
