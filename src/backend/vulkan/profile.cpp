// GPU time by shader (profile.h).
#include "backend/vulkan/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace clover::vulkan {

bool GpuProfile::enabled() {
  const char* v = std::getenv("CLOVER_VK_PROFILE");  // read by each new command list
  return v && *v && std::strcmp(v, "0") != 0;
}

GpuProfile& GpuProfile::get() {
  static GpuProfile profile;
  return profile;
}

GpuProfile::~GpuProfile() {
  if (submissions_) std::fputs(report().c_str(), stderr);
}

void GpuProfile::add(const std::string& label, double ns, uint64_t workgroups) {
  std::lock_guard<std::mutex> lock(mutex_);
  Sum& s = ops_[label];
  ++s.calls;
  s.ns += ns;
  s.workgroups += workgroups;
  workgroups_total_ += workgroups;
}

void GpuProfile::add_submission(uint32_t ops, uint32_t barriers_needed, double ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++submissions_;
  ops_total_ += ops;
  barriers_total_ += barriers_needed;
  ns_total_ += ns;
}

void GpuProfile::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  ops_.clear();
  submissions_ = ops_total_ = workgroups_total_ = barriers_total_ = 0;
  ns_total_ = 0;
}

std::string GpuProfile::report() const {
  std::lock_guard<std::mutex> lock(mutex_);
  using Row = std::pair<std::string, Sum>;
  std::vector<Row> rows(ops_.begin(), ops_.end());
  std::map<std::string, Sum> by_shader;
  for (const Row& r : rows) {
    Sum& s = by_shader[r.first.substr(0, r.first.find(' '))];
    s.calls += r.second.calls;
    s.ns += r.second.ns;
    s.workgroups += r.second.workgroups;
  }
  std::vector<Row> shaders(by_shader.begin(), by_shader.end());
  const auto by_time = [](const Row& a, const Row& b) { return a.second.ns > b.second.ns; };
  std::sort(rows.begin(), rows.end(), by_time);
  std::sort(shaders.begin(), shaders.end(), by_time);
  const double total = ns_total_ > 0 ? ns_total_ : 1;
  std::string out = fmt::format(
      "vulkan profile (CLOVER_VK_PROFILE): {} submissions, {} ops, {} barriers needed (one after every op while "
      "profiling), {:.3f} ms of GPU time from each submission's first timestamp to its last ({:.1f} us per "
      "submission), {} workgroups\n",
      submissions_, ops_total_, barriers_total_, ns_total_ / 1e6, ns_total_ / 1e3 / static_cast<double>(submissions_ ? submissions_ : 1),
      workgroups_total_);
  const auto table = [&](const char* title, const std::vector<Row>& r, size_t limit) {
    out += fmt::format("{}\n  {:>6} {:>10} {:>8} {:>9} {:>9}  {}\n", title, "share", "ms", "calls", "us/call", "wg/call",
                       "op [grid]");
    double rest = 0;
    uint64_t rest_calls = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      const Sum& s = r[i].second;
      if (i < limit) {
        out += fmt::format("  {:5.1f}% {:10.3f} {:8} {:9.2f} {:9.0f}  {}\n", 100.0 * s.ns / total, s.ns / 1e6, s.calls,
                           s.ns / 1e3 / static_cast<double>(s.calls),
                           static_cast<double>(s.workgroups) / static_cast<double>(s.calls), r[i].first);
      } else {
        rest += s.ns, rest_calls += s.calls;
      }
    }
    if (rest_calls)
      out += fmt::format("  {:5.1f}% {:10.3f} {:8} {:>9} {:>9}  ({} more)\n", 100.0 * rest / total, rest / 1e6, rest_calls,
                         "", "", r.size() - limit);
  };
  table("by shader:", shaders, shaders.size());
  table("by shader and grid:", rows, 40);
  return out;
}

}  // namespace clover::vulkan
