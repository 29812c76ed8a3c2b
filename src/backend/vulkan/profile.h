// GPU time by shader, measured with timestamp queries (CLOVER_VK_PROFILE=1): every command list
// writes a timestamp after each dispatch and copy it records (after the barrier that follows it,
// so one op's span runs from the end of the previous op to its own end: its launch, its run and
// the drain of the barrier). Every submission's spans are summed here by shader and grid, and the
// table is printed on stderr when the process exits, with each shader's share of the GPU time.
// Off by default: the timestamps themselves cost a little on a real GPU.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace clover::vulkan {

class GpuProfile {
 public:
  static bool enabled();      // CLOVER_VK_PROFILE set (and not "0")
  static GpuProfile& get();   // the process's profile (printed at exit if anything was added)
  ~GpuProfile();

  // One op's span of `ns` under `label` ("matmul_q4_0 [16,2048,1]") and the workgroups it launched
  // (the same on every device: a count to compare on lavapipe).
  void add(const std::string& label, double ns, uint64_t workgroups);
  // One submission of a list: its dispatches, the barriers its hazard tracking keeps (a profiled
  // list puts one after every op, so each op's span is its own), and the time from its first
  // timestamp to its last.
  void add_submission(uint32_t ops, uint32_t barriers_needed, double ns);
  // The table: ops by total time, then the same by shader (labels without their grid).
  std::string report() const;
  void clear();

 private:
  struct Sum {
    uint64_t calls = 0, workgroups = 0;
    double ns = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::string, Sum> ops_;
  uint64_t submissions_ = 0, ops_total_ = 0, workgroups_total_ = 0, barriers_total_ = 0;
  double ns_total_ = 0;
};

}  // namespace clover::vulkan
