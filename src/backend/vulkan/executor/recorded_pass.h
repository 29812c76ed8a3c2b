// Passes recorded once per shape and resubmitted. A pass's command lists depend only on its shape:
// the token count, kind and sequence of each stacked pass, and the rows its head computes. What
// changes between passes of one shape the shaders read from host-visible buffers the executor
// rewrites before each submission: the tokens' embedding rows, the rope table, and the pass
// parameters (each stacked pass's n_past, read by kv_store and attention). A pass of a shape seen
// before costs the host those writes and one vkQueueSubmit per segment (one, unless a host step or a
// second chunk of head rows splits it).
//
// A sequence's buffers (its KV caches, its recurrent state) are bound by the recorded lists, so
// the sequence is part of the key (by VulkanSequence::id, never reused). Entries of sequences that
// are gone are never found again and age out of the cache like any other.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "backend/executor.h"
#include "backend/vulkan/commands.h"

namespace clover::vulkan {

// A pass as recorded: command lists submitted in order, each waited for before the host's part
// after it (reading a chunk of head rows, whose scratch the next chunk reuses; a host step), and
// host work that runs beside the next list (submitted before it starts, waited for after it).
struct RecordedPass {
  struct Segment {
    std::unique_ptr<CommandList> list;
    int head_chunk = -1;              // the chunk of head rows read back after this segment (-1: none)
    // Host work between this segment and the next (e.g. experts computed on the CPU): it may read
    // and write the executor's scratch, never the pass's own arguments, which change between
    // submissions of the same recording.
    std::function<void()> host_step;
    // Host work run after host_step while the next segment executes on the device (experts in
    // RAM computed beside the device's own experts and the shared expert): it must not touch what
    // the next segment reads or writes, and what it uploads is for the segments after that.
    std::function<void()> beside_next;
  };
  std::vector<Segment> segments;  // [0, used) are the recording's; any after are kept for reuse
  size_t used = 0;
  bool complete = false;          // recorded to the end (a recording that threw is never submitted)
};

// What a recording of these passes depends on, as a key (see the file comment). Passes of
// `position_keyed_tokens` or more tokens are keyed by their position too (a recording may pick how
// it splits a long causal pass by its absolute positions; such passes are prefill chunks, seldom
// repeated anyway).
std::vector<int64_t> pass_key(std::span<const backend::Pass> passes, int64_t position_keyed_tokens);

// Recorded passes by key; past `capacity` the least recently used one is dropped (its command
// lists reused for the next recording), so memory stays bounded however many shapes a server sees.
class PassCache {
 public:
  explicit PassCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}
  // The complete recording under `key`, now the most recently used; nullptr when there is none.
  RecordedPass* find(const std::vector<int64_t>& key);
  // An entry to record under `key` (replacing an incomplete one), complete = false.
  RecordedPass& add(const std::vector<int64_t>& key);
  size_t size() const { return lru_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  using Entry = std::pair<std::vector<int64_t>, RecordedPass>;
  std::list<Entry> lru_;  // most recently used first
  std::map<std::vector<int64_t>, std::list<Entry>::iterator> index_;
  size_t capacity_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace clover::vulkan
