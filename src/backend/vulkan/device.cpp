// Logical device, buffers, staging copies and the timeline (device.h).
#include "backend/vulkan/device.h"

#include <cstdio>

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "backend/vulkan/pipeline.h"

namespace clover::vulkan {

namespace {
constexpr uint64_t kStagingBytes = 8ull << 20;  // one staging buffer, reused chunk by chunk
uint64_t round4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }
}  // namespace

// ---- Buffer ----------------------------------------------------------------------------------

Buffer::~Buffer() { release(); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    dev_ = o.dev_, buffer_ = o.buffer_, memory_ = o.memory_, size_ = o.size_, allocated_ = o.allocated_;
    purpose_ = o.purpose_, residency_ = o.residency_, device_local_ = o.device_local_, mapped_ = o.mapped_;
    o.dev_ = nullptr, o.buffer_ = VK_NULL_HANDLE, o.memory_ = VK_NULL_HANDLE, o.mapped_ = nullptr;
    o.size_ = o.allocated_ = 0;
  }
  return *this;
}

void Buffer::release() {
  if (!dev_) return;
  const DeviceFns& f = dev_->fn_;
  if (mapped_) f.vkUnmapMemory(dev_->device_, memory_);
  if (buffer_) f.vkDestroyBuffer(dev_->device_, buffer_, nullptr);
  if (memory_) {
    f.vkFreeMemory(dev_->device_, memory_, nullptr);
    dev_->memory_.unbook(purpose_, allocated_, device_local_);
  }
  dev_ = nullptr, buffer_ = VK_NULL_HANDLE, memory_ = VK_NULL_HANDLE, mapped_ = nullptr;
}

// ---- Device ----------------------------------------------------------------------------------

Device::Device(const Instance& instance, int index) : instance_(instance) {
  if (index < 0 || index >= static_cast<int>(instance.devices().size()))
    throw VulkanError(fmt::format("Vulkan device {} does not exist", index));
  info_ = instance.devices()[index];
  if (!info_.usable()) throw VulkanError(fmt::format("Vulkan device {} ({}): {}", index, info_.name, info_.unusable_reason()));
  const VulkanFns& vf = instance.fns();
  VkPhysicalDevice pd = instance.physical(index);
  vf.vkGetPhysicalDeviceMemoryProperties(pd, &mem_props_);

  // A compute queue; a family without graphics first (a dedicated compute queue on discrete GPUs).
  uint32_t nq = 0;
  vf.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vf.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf.data());
  int family = -1;
  for (uint32_t i = 0; i < nq && family < 0; ++i)
    if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) family = static_cast<int>(i);
  for (uint32_t i = 0; i < nq && family < 0; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = static_cast<int>(i);
  queue_family_ = static_cast<uint32_t>(family);
  timestamp_valid_bits_ = qf[queue_family_].timestampValidBits;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  // Only what every shader of this backend needs: timeline semaphores. (The shaders read
  // buffers as 32-bit words and do their own fp16 conversions, so no 8/16-bit storage is needed.)
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.timelineSemaphore = VK_TRUE;
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  feats.pNext = &f12;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &feats;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  vk_check(vf.vkCreateDevice(pd, &dci, nullptr, &device_), "vkCreateDevice");
  std::string err;
  if (!load_device_fns(vf, device_, fn_, err)) throw VulkanError(err);
  fn_.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_family_;
  vk_check(fn_.vkCreateCommandPool(device_, &pci, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  vk_check(fn_.vkAllocateCommandBuffers(device_, &cai, &transfer_cb_), "vkAllocateCommandBuffers");

  VkSemaphoreTypeCreateInfo sti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  sti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  sti.initialValue = 0;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sci.pNext = &sti;
  vk_check(fn_.vkCreateSemaphore(device_, &sci, nullptr, &timeline_), "vkCreateSemaphore(timeline)");

  binding_limit_ = info_.max_storage_buffer_range;
  pipelines_ = std::make_unique<PipelineCache>(*this);
}

Device::~Device() {
  if (!device_) return;
  fn_.vkDeviceWaitIdle(device_);
  pipelines_.reset();
  staging_ = Buffer();
  if (timeline_) fn_.vkDestroySemaphore(device_, timeline_, nullptr);
  if (pool_) fn_.vkDestroyCommandPool(device_, pool_, nullptr);
  fn_.vkDestroyDevice(device_, nullptr);
}

void Device::set_binding_limit(uint64_t bytes) {
  const uint64_t a = std::max<uint64_t>(info_.min_storage_offset_alignment, 4);
  if (bytes < 4 * a || bytes > info_.max_storage_buffer_range)
    throw VulkanError(fmt::format("binding limit {} outside [{}, {}]", bytes, 4 * a, info_.max_storage_buffer_range));
  binding_limit_ = bytes;
}

uint32_t Device::memory_type(uint32_t type_bits, Residency residency, bool& device_local) const {
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  auto find = [&](VkMemoryPropertyFlags want) -> int {
    for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
      if ((type_bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
    return -1;
  };
  int t = residency == Residency::Device ? find(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) : find(host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (t < 0) t = residency == Residency::Device ? find(0) : find(host);
  if (t < 0) throw VulkanError("no Vulkan memory type fits the buffer");
  device_local = (mem_props_.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0;
  return static_cast<uint32_t>(t);
}

Buffer Device::create_buffer(uint64_t bytes, MemoryPurpose purpose, Residency residency) {
  if (bytes == 0) throw VulkanError("create_buffer: zero bytes");
  bytes = round4(bytes);
  if (info_.max_allocation_size && bytes > info_.max_allocation_size)
    throw VulkanError(fmt::format("a {} buffer of {} bytes exceeds the device's largest allocation ({} bytes)",
                                  purpose_name(purpose), bytes, info_.max_allocation_size));
  Buffer b;
  b.dev_ = this;
  b.size_ = bytes;
  b.purpose_ = purpose;
  b.residency_ = residency;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  vk_check(fn_.vkCreateBuffer(device_, &bci, nullptr, &b.buffer_), "vkCreateBuffer");
  VkMemoryRequirements req;
  fn_.vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = memory_type(req.memoryTypeBits, residency, b.device_local_);
  const VkResult r = fn_.vkAllocateMemory(device_, &mai, nullptr, &b.memory_);
  if (r != VK_SUCCESS) {
    b.memory_ = VK_NULL_HANDLE;
    throw VulkanError(fmt::format("allocating {} bytes of device memory for {} ({} in use): {}", req.size,
                                  purpose_name(purpose), memory_.total(), result_name(r)));
  }
  b.allocated_ = req.size;
  memory_.book(purpose, req.size, b.device_local_);
  vk_check(fn_.vkBindBufferMemory(device_, b.buffer_, b.memory_, 0), "vkBindBufferMemory");
  if (residency == Residency::Host) vk_check(fn_.vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_), "vkMapMemory");
  return b;
}

void Device::run_transfer(const std::function<void(VkCommandBuffer)>& record) {
  std::lock_guard<std::recursive_mutex> lock(pool_mutex_);
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk_check(fn_.vkBeginCommandBuffer(transfer_cb_, &bi), "vkBeginCommandBuffer");
  // Earlier shader and host writes become visible to the transfer, and the transfer's writes to
  // the host and to later shaders.
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  fn_.vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                           VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  record(transfer_cb_);
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  fn_.vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                           VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  vk_check(fn_.vkEndCommandBuffer(transfer_cb_), "vkEndCommandBuffer");
  wait(submit(transfer_cb_));
}

void Device::copy(VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t bytes) {
  run_transfer([&](VkCommandBuffer cb) {
    VkBufferCopy region{src_off, dst_off, bytes};
    fn_.vkCmdCopyBuffer(cb, src, dst, 1, &region);
  });
}

const Buffer& Device::staging() {
  if (!staging_) staging_ = create_buffer(kStagingBytes, MemoryPurpose::Staging, Residency::Host);
  return staging_;
}

namespace {
void check_copy(const char* what, const Buffer& b, uint64_t offset, uint64_t bytes) {
  if (offset % 4 || bytes % 4 || offset + bytes > b.size())
    throw VulkanError(fmt::format("{} of {} bytes at {} in a buffer of {} (offsets and sizes must be multiples of 4)", what,
                                  bytes, offset, b.size()));
}
}  // namespace

void Device::copy_buffer(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes) {
  check_copy("copy from", src, src_offset, bytes);
  check_copy("copy to", dst, dst_offset, bytes);
  if (bytes) copy(src.handle(), src_offset, dst.handle(), dst_offset, bytes);
}

void Device::upload(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) {
  check_copy("upload", dst, offset, bytes);
  if (dst.residency() == Residency::Host) {
    std::memcpy(static_cast<uint8_t*>(dst.mapped()) + offset, src, bytes);
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(pool_mutex_);  // the staging buffer is shared
  const Buffer& st = staging();
  const auto* s = static_cast<const uint8_t*>(src);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kStagingBytes, bytes - done);
    std::memcpy(st.mapped(), s + done, n);
    copy(st.handle(), 0, dst.handle(), offset + done, n);
    done += n;
  }
}

void Device::download(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  check_copy("download", src, offset, bytes);
  if (src.residency() == Residency::Host) {
    std::memcpy(dst, static_cast<const uint8_t*>(src.mapped()) + offset, bytes);
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(pool_mutex_);
  const Buffer& st = staging();
  auto* d = static_cast<uint8_t*>(dst);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kStagingBytes, bytes - done);
    copy(src.handle(), offset + done, st.handle(), 0, n);
    std::memcpy(d + done, st.mapped(), n);
    done += n;
  }
}

void Device::fill_zero(const Buffer& dst) {
  run_transfer([&](VkCommandBuffer cb) { fn_.vkCmdFillBuffer(cb, dst.handle(), 0, VK_WHOLE_SIZE, 0); });
}

uint64_t Device::submit(VkCommandBuffer cb) {
  std::lock_guard<std::mutex> lock(submit_mutex_);
  const uint64_t value = ++next_value_;
  VkTimelineSemaphoreSubmitInfo tsi{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  tsi.signalSemaphoreValueCount = 1;
  tsi.pSignalSemaphoreValues = &value;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &tsi;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &timeline_;
  vk_check(fn_.vkQueueSubmit(queue_, 1, &si, VK_NULL_HANDLE), "vkQueueSubmit");
  return value;
}

void Device::wait(uint64_t value) {
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &timeline_;
  wi.pValues = &value;
  for (uint64_t waited = 0;;) {
    const VkResult r = fn_.vkWaitSemaphores(device_, &wi, wait_note_ns_);
    if (r != VK_TIMEOUT) {
      vk_check(r, "vkWaitSemaphores");
      return;
    }
    waited += wait_note_ns_;
    std::fprintf(stderr, "vulkan: a submission has run for %.0f s on %s; still waiting\n", waited * 1e-9,
                 info_.name.c_str());
  }
}

uint64_t Device::completed() const {
  uint64_t v = 0;
  vk_check(fn_.vkGetSemaphoreCounterValue(device_, timeline_, &v), "vkGetSemaphoreCounterValue");
  return v;
}

}  // namespace clover::vulkan
