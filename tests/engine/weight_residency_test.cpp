// How the weights come into memory (EngineOptions::mmap, mlock, prefault; issue #25): every way
// gives bit-identical logits, the pre-fault finishes and says so, an engine destroyed during it
// shuts down cleanly, a refused lock is a warning naming the limit, and a truncated file is the
// same clear error without the mapping.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "clover/clover.h"
#include "../model/model_test_util.h"

namespace clover {
namespace {

class WeightResidencyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    synth::SynthConfig c = synth::preset("tiny");
    c.type = DType::Q8_0;
    path_ = testing::write_synth(*dir_, "tiny.gguf", c);
  }
  static void TearDownTestSuite() { delete dir_; }

  static EngineOptions options() {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 128;
    o.device = "cpu";
    return o;
  }
  // Every position's logits of a fixed prompt.
  static std::vector<float> logits(Engine& e) {
    const std::vector<int32_t> prompt = testing::random_tokens(24, e.info().n_vocab, 7);
    return e.new_session()->eval(prompt, true);
  }
  static PrefaultStatus wait_prefault(const Engine& e) {
    const auto t0 = std::chrono::steady_clock::now();
    while (e.prefault_status().state == PrefaultStatus::State::Running &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return e.prefault_status();
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::string path_;
};

using testing::same_bits;

TEST_F(WeightResidencyTest, BackgroundPrefaultFinishesAndIsReported) {
  std::mutex mu;
  uint64_t last_done = 0, last_total = 0;
  EngineOptions o = options();
  o.on_progress = [&](std::string_view label, uint64_t done, uint64_t total) {
    if (label != "prefault") return;
    std::lock_guard lk(mu);
    EXPECT_GE(done, last_done);
    last_done = done, last_total = total;
  };
  auto e = Engine::load(path_, o);
  const PrefaultStatus s = wait_prefault(*e);
  EXPECT_EQ(s.state, PrefaultStatus::State::Done);
  EXPECT_GT(s.total_bytes, 0u);
  EXPECT_EQ(s.done_bytes, s.total_bytes);
  EXPECT_LE(s.total_bytes, e->info().file_bytes);
  std::lock_guard lk(mu);
  EXPECT_EQ(last_done, s.total_bytes);
  EXPECT_EQ(last_total, s.total_bytes);
  EXPECT_EQ(prefault_state_name(s.state), "done");
}

TEST_F(WeightResidencyTest, EveryWayOfLoadingGivesBitIdenticalLogits) {
  EngineOptions off = options();
  off.prefault = Prefault::Off;
  auto ref_engine = Engine::load(path_, off);
  EXPECT_EQ(ref_engine->prefault_status().state, PrefaultStatus::State::Off);
  const std::vector<float> ref = logits(*ref_engine);
  ASSERT_FALSE(ref.empty());

  struct Way {
    const char* name;
    bool mmap, mlock;
    Prefault prefault;
  };
  for (const Way& w : {Way{"background pre-fault", true, false, Prefault::Background}, Way{"pre-fault wait", true, false, Prefault::Wait},
                       Way{"--no-mmap", false, false, Prefault::Background}, Way{"--mlock", true, true, Prefault::Background},
                       Way{"--no-mmap --mlock", false, true, Prefault::Off}}) {
    SCOPED_TRACE(w.name);
    EngineOptions o = options();
    o.mmap = w.mmap, o.mlock = w.mlock, o.prefault = w.prefault;
    uint64_t read_done = 0, read_total = 0;
    o.on_progress = [&](std::string_view label, uint64_t done, uint64_t total) {
      if (label == "read") read_done = done, read_total = total;
    };
    auto e = Engine::load(path_, o);
    EXPECT_TRUE(same_bits(logits(*e), ref));
    if (!w.mmap) {
      EXPECT_EQ(read_done, e->info().file_bytes) << "the read reports its progress to the end";
      EXPECT_EQ(read_total, e->info().file_bytes);
    }
    // The pre-fault runs only on a mapped file that is not locked: otherwise the weights are in
    // memory already. (Without root, a lock past RLIMIT_MEMLOCK is refused with a warning.)
    bool locked = w.mlock;
    for (const auto& warning : e->info().warnings)
      if (warning.find("--mlock") != std::string::npos) locked = false;
    const PrefaultStatus s = w.prefault == Prefault::Background ? wait_prefault(*e) : e->prefault_status();
    const bool walks = w.mmap && !locked && w.prefault != Prefault::Off;
    EXPECT_EQ(s.state, walks ? PrefaultStatus::State::Done : PrefaultStatus::State::Off);
  }
}

TEST_F(WeightResidencyTest, DestroyingTheEngineDuringThePrefaultIsClean) {
  // A file a few times the tiny one, destroyed at once: the walk is still running (or just done);
  // either way the destructor must stop and join it before the mapping goes (TSan runs this too).
  for (int i = 0; i < 3; ++i) {
    auto e = Engine::load(path_, options());
    EXPECT_NE(e->prefault_status().state, PrefaultStatus::State::Off);
    e.reset();
  }
  auto e = Engine::load(path_, options());
  EXPECT_FALSE(logits(*e).empty());  // passes while the walk runs
  e.reset();
}

TEST_F(WeightResidencyTest, TruncatedFileIsTheSameClearErrorWithoutTheMapping) {
  const std::string cut = dir_->file("cut.gguf");
  std::filesystem::copy_file(path_, cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, std::filesystem::file_size(path_) / 2);
  for (bool mmap : {true, false}) {
    SCOPED_TRACE(mmap ? "mmap" : "--no-mmap");
    EngineOptions o = options();
    o.mmap = mmap;
    try {
      Engine::load(cut, o);
      ADD_FAILURE() << "loaded a truncated file";
    } catch (const Error& err) {
      const std::string msg = err.what();
      EXPECT_NE(msg.find("cut.gguf"), std::string::npos) << msg;
      EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    }
  }
}

// Drops CAP_IPC_LOCK from this thread's effective set (root could lock past any limit) and lowers
// RLIMIT_MEMLOCK to nothing, restoring both at the end of the scope.
class NoLockAllowed {
 public:
  NoLockAllowed() {
    hdr_.version = _LINUX_CAPABILITY_VERSION_3;
    hdr_.pid = 0;
    have_caps_ = syscall(SYS_capget, &hdr_, caps_) == 0;
    if (have_caps_) {
      __user_cap_data_struct lowered[2];
      std::memcpy(lowered, caps_, sizeof caps_);
      lowered[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
      syscall(SYS_capset, &hdr_, lowered);
    }
    getrlimit(RLIMIT_MEMLOCK, &saved_);
    rlimit none = saved_;
    none.rlim_cur = 0;
    setrlimit(RLIMIT_MEMLOCK, &none);
  }
  ~NoLockAllowed() {
    setrlimit(RLIMIT_MEMLOCK, &saved_);
    if (have_caps_) syscall(SYS_capset, &hdr_, caps_);
  }

 private:
  __user_cap_header_struct hdr_{};
  __user_cap_data_struct caps_[2]{};
  bool have_caps_ = false;
  rlimit saved_{};
};

// The sanitizer runtimes intercept mlock and report success without locking (compiler-rt's
// common interceptors), so under TSan / ASan no lock can be refused.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CLOVER_MLOCK_INTERCEPTED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define CLOVER_MLOCK_INTERCEPTED 1
#endif
#endif

TEST_F(WeightResidencyTest, RefusedLockIsAWarningNamingTheLimit) {
#ifdef CLOVER_MLOCK_INTERCEPTED
  GTEST_SKIP() << "a sanitizer runtime answers mlock with success: no lock can be refused here";
#endif
  EngineOptions off = options();
  off.prefault = Prefault::Off;
  const std::vector<float> ref = logits(*Engine::load(path_, off));
  EngineOptions o = options();
  o.mlock = true;
  std::unique_ptr<Engine> e;
  {
    NoLockAllowed no_lock;
    e = Engine::load(path_, o);
  }
  bool warned = false;
  for (const auto& w : e->info().warnings)
    if (w.find("--mlock") != std::string::npos) {
      warned = true;
      EXPECT_NE(w.find("RLIMIT_MEMLOCK"), std::string::npos) << w;
    }
  EXPECT_TRUE(warned) << "no --mlock warning";
  EXPECT_TRUE(same_bits(logits(*e), ref));
  // The lock did not happen, so the pre-fault ran instead.
  EXPECT_EQ(wait_prefault(*e).state, PrefaultStatus::State::Done);
}

}  // namespace
}  // namespace clover
