// Where a CPU pass's time goes (CLOVER_CPU_PROFILE=1; issue #25): each part of the forward pass
// (the embedding, the norms and residual adds, a GDN layer's projections / recurrence / output, an
// attention layer's projections / core / output, the router, the routing, the experts, their
// weighted sum, the LM head) is timed on the calling thread around its parallel region, with the
// bytes it reads (weights, and the KV cache or recurrent state), and the table is printed on
// stderr when the process exits: time per token, share of the pass, bytes per token and the rate
// they were read at, the figure to hold against the machine's read bandwidth. The pass's own span
// is timed too, so what no part covers (the executor's bookkeeping) shows as "other".
//
// Off by default; when off a part costs one predictable branch. The parts only time and count:
// results are bitwise the same either way (tests/backend/cpu/pass_profile_test.cpp).
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "kernels/matmul.h"

namespace clover::backend::cpu {

enum class PassPart : uint8_t {
  Embed,
  NormsResidual,    // the layers' input norms and residual adds, the head's norm
  GdnProjections,   // qkv, z, beta, alpha (and the reverse path's beta', alpha')
  GdnRecurrence,    // conv + silu, L2 norms, the delta rule (and the reverse path), the gated norm
  GdnOutput,        // Wout
  AttnProjections,  // Wq (with the gate), Wk, Wv
  AttnCore,         // q/k norms, rope, the cache writes, softmax(q k^T) v over the cache, the gate
  AttnOutput,       // Wo
  Router,           // the router and the shared expert's gate
  Routing,          // softmax, top-k, grouping rows by expert
  Experts,          // the routed experts and the shared expert (the expert runner)
  Combine,          // the weighted sum of the experts' outputs
  Head,             // the LM head's product
  kCount
};
const char* pass_part_name(PassPart p);

class PassProfile {
 public:
  // The process's profile when CLOVER_CPU_PROFILE is set (and not "0"), else null.
  static PassProfile* active();
  // Turns the profile on (or off) from here on, whatever the environment says (tests).
  static PassProfile& enable();
  static void disable();
  ~PassProfile();  // prints the report on stderr if a pass was recorded

  void add(PassPart p, int64_t ns, uint64_t bytes);
  // Bytes read by the part now running on the calling thread (linear() reports a product's weights).
  void add_bytes(uint64_t bytes);
  void add_pass(int64_t tokens, int64_t ns);
  std::string report() const;
  void clear();

  struct Sum {
    uint64_t calls = 0, bytes = 0;
    int64_t ns = 0;
  };
  Sum part(PassPart p) const;
  uint64_t passes() const;
  uint64_t tokens() const;
  int64_t pass_ns() const;

 private:
  friend class PartScope;
  mutable std::mutex mutex_;
  std::array<Sum, static_cast<size_t>(PassPart::kCount)> parts_{};
  uint64_t passes_ = 0, tokens_ = 0;
  int64_t pass_ns_ = 0;
  PassPart current_ = PassPart::kCount;
};

// Times one part on the calling thread (no-op when the profile is off).
class PartScope {
 public:
  explicit PartScope(PassPart p, uint64_t bytes = 0);
  ~PartScope();
  PartScope(const PartScope&) = delete;
  PartScope& operator=(const PartScope&) = delete;

 private:
  PassProfile* prof_;
  PassPart part_, outer_;
  uint64_t bytes_;
  std::chrono::steady_clock::time_point t0_;
};

// Times a whole pass (its tokens: rows through the layers).
class PassScope {
 public:
  explicit PassScope(int64_t tokens);
  ~PassScope();
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

 private:
  PassProfile* prof_;
  int64_t tokens_;
  std::chrono::steady_clock::time_point t0_;
};

// A matrix's bytes (what one product over it reads).
inline uint64_t mat_bytes(const kernels::MatRef& w) { return static_cast<uint64_t>(w.rows) * w.row_stride; }

}  // namespace clover::backend::cpu
