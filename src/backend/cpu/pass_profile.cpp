#include "backend/cpu/pass_profile.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace clover::backend::cpu {

const char* pass_part_name(PassPart p) {
  switch (p) {
    case PassPart::Embed: return "embedding";
    case PassPart::NormsResidual: return "norms + residual adds";
    case PassPart::GdnProjections: return "GDN input projections";
    case PassPart::GdnRecurrence: return "GDN conv + delta rule + gated norm";
    case PassPart::GdnOutput: return "GDN output projection";
    case PassPart::AttnProjections: return "attention q/k/v projections";
    case PassPart::AttnCore: return "attention norms, rope, cache, softmax";
    case PassPart::AttnOutput: return "attention output projection";
    case PassPart::Router: return "router + shared gate";
    case PassPart::Routing: return "routing (top-k, grouping)";
    case PassPart::Experts: return "experts (routed + shared)";
    case PassPart::Combine: return "experts' weighted sum";
    case PassPart::Head: return "LM head";
    case PassPart::kCount: break;
  }
  return "?";
}

namespace {
int64_t ns_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

std::unique_ptr<PassProfile>& holder() {
  static std::unique_ptr<PassProfile> profile = [] {
    const char* v = std::getenv("CLOVER_CPU_PROFILE");
    return v && *v && std::strcmp(v, "0") != 0 ? std::make_unique<PassProfile>() : nullptr;
  }();
  return profile;
}
}  // namespace

PassProfile* PassProfile::active() { return holder().get(); }

PassProfile& PassProfile::enable() {
  if (!holder()) holder() = std::make_unique<PassProfile>();
  return *holder();
}

void PassProfile::disable() { holder().reset(); }

PassProfile::Sum PassProfile::part(PassPart p) const {
  std::lock_guard lock(mutex_);
  return parts_[static_cast<size_t>(p)];
}
uint64_t PassProfile::passes() const {
  std::lock_guard lock(mutex_);
  return passes_;
}
uint64_t PassProfile::tokens() const {
  std::lock_guard lock(mutex_);
  return tokens_;
}
int64_t PassProfile::pass_ns() const {
  std::lock_guard lock(mutex_);
  return pass_ns_;
}

PassProfile::~PassProfile() {
  if (passes_ > 0) std::fputs(report().c_str(), stderr);
}

void PassProfile::add(PassPart p, int64_t ns, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  Sum& s = parts_[static_cast<size_t>(p)];
  ++s.calls;
  s.ns += ns;
  s.bytes += bytes;
}

void PassProfile::add_bytes(uint64_t bytes) {
  if (current_ == PassPart::kCount) return;
  std::lock_guard lock(mutex_);
  parts_[static_cast<size_t>(current_)].bytes += bytes;
}

void PassProfile::add_pass(int64_t tokens, int64_t ns) {
  std::lock_guard lock(mutex_);
  ++passes_;
  tokens_ += static_cast<uint64_t>(tokens);
  pass_ns_ += ns;
}

std::string PassProfile::report() const {
  std::lock_guard lock(mutex_);
  const double passes = static_cast<double>(std::max<uint64_t>(passes_, 1));
  std::string out = fmt::format(
      "CPU pass profile (CLOVER_CPU_PROFILE): {} passes, {} tokens, {:.3f} ms per pass; per pass:\n"
      "| part | calls | ms | share | MB read | GB/s |\n|---|---:|---:|---:|---:|---:|\n",
      passes_, tokens_, static_cast<double>(pass_ns_) / passes / 1e6);
  int64_t covered = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const Sum& s = parts_[i];
    if (s.calls == 0) continue;
    covered += s.ns;
    bytes += s.bytes;
    out += fmt::format("| {} | {:.1f} | {:.3f} | {:.1f} % | {:.2f} | {:.1f} |\n", pass_part_name(static_cast<PassPart>(i)),
                       static_cast<double>(s.calls) / passes, static_cast<double>(s.ns) / passes / 1e6,
                       100.0 * static_cast<double>(s.ns) / static_cast<double>(std::max<int64_t>(pass_ns_, 1)),
                       static_cast<double>(s.bytes) / passes / 1e6,
                       s.ns > 0 ? static_cast<double>(s.bytes) / static_cast<double>(s.ns) : 0.0);
  }
  const int64_t other = pass_ns_ - covered;
  out += fmt::format("| other (outside the parts) | | {:.3f} | {:.1f} % | | |\n", static_cast<double>(other) / passes / 1e6,
                     100.0 * static_cast<double>(other) / static_cast<double>(std::max<int64_t>(pass_ns_, 1)));
  out += fmt::format("| **pass** | | {:.3f} | 100 % | {:.2f} | {:.1f} |\n", static_cast<double>(pass_ns_) / passes / 1e6,
                     static_cast<double>(bytes) / passes / 1e6,
                     pass_ns_ > 0 ? static_cast<double>(bytes) / static_cast<double>(pass_ns_) : 0.0);
  return out;
}

void PassProfile::clear() {
  std::lock_guard lock(mutex_);
  parts_ = {};
  passes_ = tokens_ = 0;
  pass_ns_ = 0;
}

PartScope::PartScope(PassPart p, uint64_t bytes)
    : prof_(PassProfile::active()), part_(p), outer_(PassPart::kCount), bytes_(bytes) {
  if (!prof_) return;
  outer_ = prof_->current_;
  prof_->current_ = p;
  t0_ = std::chrono::steady_clock::now();
}

PartScope::~PartScope() {
  if (!prof_) return;
  prof_->add(part_, ns_since(t0_), bytes_);
  prof_->current_ = outer_;
}

PassScope::PassScope(int64_t tokens) : prof_(PassProfile::active()), tokens_(tokens) {
  if (prof_) t0_ = std::chrono::steady_clock::now();
}

PassScope::~PassScope() {
  if (prof_) prof_->add_pass(tokens_, ns_since(t0_));
}

}  // namespace clover::backend::cpu
