// A command list: dispatches recorded once and submitted as often as needed (a pass of a given
// shape records its list once; every later pass of that shape resubmits it, so the host cost of a
// pass is one vkQueueSubmit, not one call per op). Each dispatch gets its own descriptor set,
// allocated from the list's pools, so a recorded list keeps its bindings for its whole life.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "backend/vulkan/device.h"
#include "backend/vulkan/pipeline.h"

namespace clover::vulkan {

class CommandList {
 public:
  // sets_per_pool: descriptor sets of each pool; a list that records more dispatches between two
  // begin() calls adds another pool (and keeps it for the next recording).
  explicit CommandList(Device& dev, uint32_t sets_per_pool = 512);
  ~CommandList();
  CommandList(const CommandList&) = delete;
  CommandList& operator=(const CommandList&) = delete;

  // Starts recording anew (waits for a submission still in flight, frees the old sets).
  void begin();
  // One dispatch of gx x gy x gz workgroups. The ranges bind to bindings 0..n-1 in order; each
  // must fit the device's binding limit and start at a multiple of its offset alignment.
  // Ordering: a dispatch sees everything earlier ops wrote, and writes nothing they still read.
  // A barrier goes in before a dispatch only when it has a hazard with an op since the last
  // barrier: it reads or writes a byte range one of them wrote, or writes a range one of them
  // read (the pipeline's `written` bindings, from its SPIR-V's readonly decorations; ranges of
  // the same buffer overlap by bytes). Independent dispatches (the projections of one input, say)
  // thus run without a full barrier between them. CLOVER_VK_BARRIER_EVERY_DISPATCH=1, and
  // CLOVER_VK_PROFILE (so each op's time is its own), put a barrier after every dispatch instead.
  void dispatch(const Pipeline& p, std::initializer_list<BufferRange> buffers, const void* push, uint32_t push_bytes,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  template <class Push>
  void dispatch(const Pipeline& p, std::initializer_list<BufferRange> buffers, const Push& push, uint32_t gx,
                uint32_t gy = 1, uint32_t gz = 1) {
    dispatch(p, buffers, &push, sizeof(Push), gx, gy, gz);
  }
  // A buffer-to-buffer copy in the list, ordered like a dispatch: it sees what earlier dispatches
  // wrote, and later dispatches see what it wrote.
  void copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes);
  // Several regions of src to dst in one copy command (regions must not overlap in dst).
  void copy(const Buffer& src, const Buffer& dst, std::span<const VkBufferCopy> regions);
  void end();

  // Submits the recorded list (waiting first if its previous submission is still running) and
  // returns the timeline value; run() also waits for it.
  uint64_t submit();
  // Waits for the last submission (and reads its profile); run() is submit() then wait().
  void wait();
  void run();
  uint32_t dispatches() const { return n_sets_; }
  uint32_t barriers() const { return n_barriers_; }  // pipeline barriers in the recording
  // The barriers the hazard tracking keeps (= barriers() unless one follows every dispatch).
  uint32_t barriers_needed() const { return n_needed_; }
  // Tests only: no barrier between dispatches at all (to show the synchronization validation
  // layer catches the hazards that the tracking prevents).
  void skip_barriers_for_test(bool skip) { skip_barriers_ = skip; }
  bool recorded() const { return recorded_; }

 private:
  VkDescriptorPool add_pool();
  // A full memory barrier: earlier shader and transfer writes, visible to later shaders,
  // transfers and the host (emit_barrier), and the ops pending since the last one forgotten
  // (forget_pending, which counts a needed barrier).
  void barrier();
  void emit_barrier();
  void forget_pending();
  struct Span {
    VkBuffer buffer;
    uint64_t lo, hi;  // bytes [lo, hi)
  };
  static bool overlaps(const std::vector<Span>& spans, const Span& s);
  // CLOVER_VK_PROFILE (profile.h): a timestamp after each op, read back after the list's
  // submission completes.
  void stamp(std::string label, uint64_t workgroups);
  void collect_profile();  // the last submission's spans into GpuProfile, once it is known complete
  Device& dev_;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  std::vector<std::string> labels_;  // op i's span ends at timestamp i + 1
  std::vector<uint64_t> workgroups_;  // op i's workgroups (0 for a copy)
  bool unread_ = false;              // a profiled submission whose timestamps are not read yet
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> pools_;
  uint32_t sets_per_pool_ = 0, n_sets_ = 0, n_barriers_ = 0, n_needed_ = 0;
  std::vector<Span> reads_, writes_;  // of the dispatches since the last barrier
  bool barrier_every_ = false, skip_barriers_ = false;
  uint64_t last_submit_ = 0;
  bool recording_ = false, recorded_ = false;
};

}  // namespace clover::vulkan
