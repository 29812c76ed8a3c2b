#include "backend/vulkan/commands.h"

#include <fmt/format.h>

#include "backend/vulkan/profile.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace clover::vulkan {

namespace {
constexpr uint32_t kMaxBuffersPerDispatch = 8;
constexpr uint32_t kMaxStamps = 16384;  // timestamps of one profiled recording (ops beyond are not timed)
}

CommandList::CommandList(Device& dev, uint32_t sets_per_pool) : dev_(dev), sets_per_pool_(std::max(1u, sets_per_pool)) {
  std::lock_guard<std::recursive_mutex> lock(dev_.pool_mutex());
  const DeviceFns& f = dev_.fn();
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = dev_.command_pool();
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  vk_check(f.vkAllocateCommandBuffers(dev_.handle(), &cai, &cb_), "vkAllocateCommandBuffers");
  add_pool();
  if (GpuProfile::enabled() && dev_.timestamp_valid_bits() > 0) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = kMaxStamps;
    vk_check(f.vkCreateQueryPool(dev_.handle(), &qi, nullptr, &queries_), "vkCreateQueryPool");
  }
  const char* every = std::getenv("CLOVER_VK_BARRIER_EVERY_DISPATCH");
  barrier_every_ = queries_ != VK_NULL_HANDLE || (every && *every && std::strcmp(every, "0") != 0);
}

CommandList::~CommandList() {
  const DeviceFns& f = dev_.fn();
  if (last_submit_) dev_.wait(last_submit_);
  collect_profile();
  std::lock_guard<std::recursive_mutex> lock(dev_.pool_mutex());
  // A recording abandoned by an exception is closed first (a buffer being recorded cannot begin).
  if (recording_) f.vkEndCommandBuffer(cb_);
  if (queries_) f.vkDestroyQueryPool(dev_.handle(), queries_, nullptr);
  for (VkDescriptorPool pool : pools_) f.vkDestroyDescriptorPool(dev_.handle(), pool, nullptr);
  f.vkFreeCommandBuffers(dev_.handle(), dev_.command_pool(), 1, &cb_);
}

VkDescriptorPool CommandList::add_pool() {
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets_per_pool_ * kMaxBuffersPerDispatch};
  VkDescriptorPoolCreateInfo dp{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dp.maxSets = sets_per_pool_;
  dp.poolSizeCount = 1;
  dp.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  vk_check(dev_.fn().vkCreateDescriptorPool(dev_.handle(), &dp, nullptr, &pool), "vkCreateDescriptorPool");
  pools_.push_back(pool);
  return pool;
}

void CommandList::begin() {
  const DeviceFns& f = dev_.fn();
  if (last_submit_) dev_.wait(last_submit_);
  collect_profile();
  std::lock_guard<std::recursive_mutex> lock(dev_.pool_mutex());
  // A recording abandoned by an exception is closed first (a buffer being recorded cannot begin).
  if (recording_) f.vkEndCommandBuffer(cb_);
  for (VkDescriptorPool pool : pools_) vk_check(f.vkResetDescriptorPool(dev_.handle(), pool, 0), "vkResetDescriptorPool");
  n_sets_ = 0;
  n_barriers_ = n_needed_ = 0;
  reads_.clear();
  writes_.clear();
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  vk_check(f.vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer");
  labels_.clear();
  workgroups_.clear();
  if (queries_) {
    f.vkCmdResetQueryPool(cb_, queries_, 0, kMaxStamps);
    f.vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 0);
  }
  recording_ = true;
  recorded_ = false;
}

void CommandList::dispatch(const Pipeline& p, std::initializer_list<BufferRange> buffers, const void* push,
                           uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (!recording_) throw VulkanError(fmt::format("dispatch of {} outside begin()/end()", p.name));
  if (buffers.size() != p.n_buffers)
    throw VulkanError(fmt::format("dispatch of {}: {} buffers given, the shader binds {}", p.name, buffers.size(), p.n_buffers));
  if (push_bytes != p.push_bytes)
    throw VulkanError(fmt::format("dispatch of {}: {} push bytes given, the shader takes {}", p.name, push_bytes, p.push_bytes));
  if (gx == 0 || gy == 0 || gz == 0) throw VulkanError(fmt::format("dispatch of {} with an empty grid", p.name));
  const DeviceFns& f = dev_.fn();
  const uint64_t align = dev_.info().min_storage_offset_alignment;
  std::lock_guard<std::recursive_mutex> lock(dev_.pool_mutex());

  // Sets fill the pools in order; one more pool when they are all full.
  const size_t pool = n_sets_ / sets_per_pool_;
  if (pool == pools_.size()) add_pool();
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pools_[pool];
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &p.set_layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  vk_check(f.vkAllocateDescriptorSets(dev_.handle(), &ai, &set), "vkAllocateDescriptorSets");
  ++n_sets_;

  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(buffers.size());
  for (const BufferRange& r : buffers) {
    if (!r.buffer || !*r.buffer) throw VulkanError(fmt::format("dispatch of {}: a binding has no buffer", p.name));
    const uint64_t bytes = r.size();
    if (r.offset + bytes > r.buffer->size() || bytes == 0)
      throw VulkanError(fmt::format("dispatch of {}: binding [{}, +{}) outside a buffer of {} bytes", p.name, r.offset,
                                    bytes, r.buffer->size()));
    if (bytes > dev_.binding_limit())
      throw VulkanError(fmt::format("dispatch of {}: binding {} of {} bytes exceeds the device's storage-buffer range ({})",
                                    p.name, infos.size(), bytes, dev_.binding_limit()));
    if (align && r.offset % align)
      throw VulkanError(fmt::format("dispatch of {}: binding offset {} is not a multiple of {}", p.name, r.offset, align));
    infos.push_back({r.buffer->handle(), r.offset, bytes});
  }
  std::vector<VkWriteDescriptorSet> writes(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  f.vkUpdateDescriptorSets(dev_.handle(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);

  // A barrier first where this dispatch depends on an op since the last one (commands.h). The
  // tracking also runs when every dispatch gets a barrier, to count the ones it would keep.
  if (!skip_barriers_) {
    const auto span = [&](size_t i) { return Span{infos[i].buffer, infos[i].offset, infos[i].offset + infos[i].range}; };
    const auto written = [&](size_t i) { return (p.written >> i & 1u) != 0; };
    bool hazard = false;
    for (size_t i = 0; i < infos.size() && !hazard; ++i)
      hazard = overlaps(writes_, span(i)) || (written(i) && overlaps(reads_, span(i)));
    if (hazard) {
      if (barrier_every_) forget_pending();
      else barrier();
    }
    for (size_t i = 0; i < infos.size(); ++i) (written(i) ? writes_ : reads_).push_back(span(i));
  }
  f.vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  f.vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (push_bytes) f.vkCmdPushConstants(cb_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  f.vkCmdDispatch(cb_, gx, gy, gz);
  if (barrier_every_) emit_barrier();
  if (queries_) stamp(fmt::format("{} [{},{},{}]", p.name, gx, gy, gz), uint64_t{gx} * gy * gz);
}

void CommandList::barrier() {
  emit_barrier();
  forget_pending();
}

void CommandList::forget_pending() {
  ++n_needed_;
  reads_.clear();
  writes_.clear();
}

void CommandList::emit_barrier() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  dev_.fn().vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                                     VK_PIPELINE_STAGE_HOST_BIT,
                                 0, 1, &mb, 0, nullptr, 0, nullptr);
  ++n_barriers_;
}

bool CommandList::overlaps(const std::vector<Span>& spans, const Span& s) {
  for (const Span& o : spans)
    if (o.buffer == s.buffer && o.lo < s.hi && s.lo < o.hi) return true;
  return false;
}

void CommandList::stamp(std::string label, uint64_t workgroups) {
  if (labels_.size() + 1 >= kMaxStamps) return;
  dev_.fn().vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                                static_cast<uint32_t>(labels_.size() + 1));
  labels_.push_back(std::move(label));
  workgroups_.push_back(workgroups);
}

void CommandList::collect_profile() {
  if (!unread_) return;
  unread_ = false;
  const uint32_t n = static_cast<uint32_t>(labels_.size() + 1);
  std::vector<uint64_t> ts(n);
  vk_check(dev_.fn().vkGetQueryPoolResults(dev_.handle(), queries_, 0, n, n * sizeof(uint64_t), ts.data(),
                                           sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
           "vkGetQueryPoolResults");
  const uint32_t bits = dev_.timestamp_valid_bits();
  const uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
  const double period = dev_.info().timestamp_period_ns;
  GpuProfile& prof = GpuProfile::get();
  for (uint32_t i = 0; i + 1 < n; ++i)
    prof.add(labels_[i], static_cast<double>((ts[i + 1] - ts[i]) & mask) * period, workgroups_[i]);
  prof.add_submission(n - 1, n_needed_, static_cast<double>((ts[n - 1] - ts[0]) & mask) * period);
}

void CommandList::copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes) {
  const VkBufferCopy region{src_offset, dst_offset, bytes};
  copy(src, dst, std::span<const VkBufferCopy>(&region, 1));
}

void CommandList::copy(const Buffer& src, const Buffer& dst, std::span<const VkBufferCopy> regions) {
  if (!recording_) throw VulkanError("copy outside begin()/end()");
  if (!src || !dst || regions.empty()) throw VulkanError("copy: no buffer or no region");
  for (const VkBufferCopy& r : regions)
    if (r.srcOffset + r.size > src.size() || r.dstOffset + r.size > dst.size() || r.size == 0)
      throw VulkanError(fmt::format("copy of {} bytes from [{}] of {} to [{}] of {} bytes", r.size, r.srcOffset, src.size(),
                                    r.dstOffset, dst.size()));
  const DeviceFns& f = dev_.fn();
  std::lock_guard<std::recursive_mutex> lock(dev_.pool_mutex());
  // Copies are rare (snapshots, staging): a full barrier on each side, not tracked.
  barrier();
  f.vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), static_cast<uint32_t>(regions.size()), regions.data());
  barrier();
  if (queries_) stamp("copy", 0);
}

void CommandList::end() {
  if (!recording_) throw VulkanError("CommandList::end without begin");
  std::lock_guard<std::recursive_mutex> lock(dev_.pool_mutex());
  // What the list wrote becomes visible to the host and to later submissions (whose ops are
  // in this barrier's second scope: it orders them after everything recorded here).
  if (!skip_barriers_) barrier();
  vk_check(dev_.fn().vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
  recording_ = false;
  recorded_ = true;
}

uint64_t CommandList::submit() {
  if (!recorded_) throw VulkanError("CommandList::submit: nothing recorded (begin/dispatch/end first)");
  // Without SIMULTANEOUS_USE a command buffer may not be pending twice.
  if (last_submit_) {
    dev_.wait(last_submit_);
    collect_profile();
  }
  last_submit_ = dev_.submit(cb_);
  unread_ = queries_ != VK_NULL_HANDLE && !labels_.empty();
  return last_submit_;
}

void CommandList::wait() {
  if (last_submit_) dev_.wait(last_submit_);
  collect_profile();
}

void CommandList::run() {
  submit();
  wait();
}

}  // namespace clover::vulkan
