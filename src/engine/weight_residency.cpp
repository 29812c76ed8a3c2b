#include "engine/weight_residency.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>

#include "model/model.h"

namespace clover {

ProgressFn stderr_progress(std::string prefix, int every_percent) {
  struct Shown {
    std::chrono::steady_clock::time_point t0;
    int percent = -1;
  };
  struct State {
    std::mutex mu;  // held for one line only
    std::map<std::string, Shown, std::less<>> labels;
  };
  auto st = std::make_shared<State>();
  const int every = std::max(1, every_percent);
  return [st, prefix = std::move(prefix), every](std::string_view label, uint64_t done, uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    // A small file gets its last line only.
    const bool steps = total >= (uint64_t{1} << 30);
    const int percent = total == 0 || done >= total ? 100 : steps ? static_cast<int>(done * 100 / total) / every * every : 0;
    std::lock_guard lk(st->mu);
    auto it = st->labels.find(label);
    if (it == st->labels.end()) it = st->labels.emplace(std::string(label), Shown{now, -1}).first;
    Shown& s = it->second;
    if (percent <= s.percent || percent == 0) return;
    s.percent = percent;
    const double secs = std::chrono::duration<double>(now - s.t0).count();
    constexpr double kGiB = 1073741824.0;
    if (percent == 100)
      std::fprintf(stderr, "%s%.*s: 100%% (%.2f GiB in %.1f s, %.2f GiB/s)\n", prefix.c_str(), static_cast<int>(label.size()),
                   label.data(), total / kGiB, secs, secs > 0 ? total / kGiB / secs : 0.0);
    else
      std::fprintf(stderr, "%s%.*s: %d%% (%.2f of %.2f GiB, %.1f s)\n", prefix.c_str(), static_cast<int>(label.size()), label.data(),
                   percent, done / kGiB, total / kGiB, secs);
  };
}

}  // namespace clover

namespace clover::engine {

namespace {

runtime::ByteRanges ranges_of(const model::Model& m) {
  runtime::ByteRanges r;
  for (const auto& s : m.weights_in_use_order()) r.emplace_back(s);
  return r;
}

}  // namespace

WeightResidency::WeightResidency(const model::Model& model, const EngineOptions& opts, bool reads_host_weights,
                                 std::vector<std::string>& warnings) {
  runtime::ByteRanges ranges = ranges_of(model);
  const uint64_t total = runtime::total_bytes(ranges);
  const ProgressFn& progress = opts.on_progress;
  bool resident = !model.file().mapped();  // --no-mmap: read in whole already
  if (opts.mlock) {
    const runtime::LockResult r = runtime::lock_ranges(ranges, [&](uint64_t done, uint64_t all) {
      if (progress) progress("lock", done, all);
    });
    if (r.error != 0) warnings.push_back(runtime::lock_refusal_message(r, total));
    else resident = true;  // mlock faults every page in
  }
  finished_.total_bytes = total;
  if (resident || !reads_host_weights || opts.prefault == Prefault::Off) return;
  if (opts.prefault == Prefault::Wait) {
    const auto t0 = std::chrono::steady_clock::now();
    finished_.done_bytes = runtime::prefault_ranges(ranges, nullptr, [&](uint64_t done, uint64_t all) {
      if (progress) progress("prefault", done, all);
    });
    finished_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    finished_.state = PrefaultStatus::State::Done;
    return;
  }
  runtime::StepFn step;
  if (progress) step = [progress](uint64_t done, uint64_t all) { progress("prefault", done, all); };
  background_ = std::make_unique<runtime::BackgroundPrefault>(std::move(ranges), std::move(step));
}

WeightResidency::~WeightResidency() = default;  // BackgroundPrefault's destructor stops and joins

PrefaultStatus WeightResidency::status() const {
  if (!background_) return finished_;
  const runtime::BackgroundPrefault::Status s = background_->status();
  PrefaultStatus out;
  using State = runtime::BackgroundPrefault::State;
  out.state = s.state == State::Running ? PrefaultStatus::State::Running
              : s.state == State::Done  ? PrefaultStatus::State::Done
                                        : PrefaultStatus::State::Stopped;
  out.done_bytes = s.done;
  out.total_bytes = s.total;
  out.seconds = s.seconds;
  return out;
}

}  // namespace clover::engine
