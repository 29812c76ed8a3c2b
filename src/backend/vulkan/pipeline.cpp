#include "backend/vulkan/pipeline.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <vector>

#include "backend/vulkan/device.h"

namespace clover::vulkan {

uint32_t spirv_written_bindings(const uint32_t* words, size_t n_words) {
  constexpr uint32_t kMagic = 0x07230203;
  constexpr uint32_t kOpTypeStruct = 30, kOpTypePointer = 32, kOpVariable = 59, kOpDecorate = 71, kOpMemberDecorate = 72;
  constexpr uint32_t kNonWritable = 24, kBinding = 33, kDescriptorSet = 34;
  if (n_words < 5 || words[0] != kMagic) throw VulkanError("spirv_written_bindings: not a SPIR-V module");
  std::map<uint32_t, uint32_t> binding, set, pointee, members, var_type;  // by result id
  std::set<uint32_t> nonwritable;                                // variables decorated NonWritable
  std::map<uint32_t, std::set<uint32_t>> nonwritable_members;    // struct -> members decorated NonWritable
  std::vector<uint32_t> variables;
  for (size_t i = 5; i < n_words;) {
    const uint32_t op = words[i] & 0xffff, len = words[i] >> 16;
    if (len == 0 || i + len > n_words) throw VulkanError("spirv_written_bindings: truncated instruction");
    const uint32_t* w = &words[i];
    if (op == kOpDecorate && len >= 3) {
      if (w[2] == kBinding && len >= 4) binding[w[1]] = w[3];
      if (w[2] == kDescriptorSet && len >= 4) set[w[1]] = w[3];
      if (w[2] == kNonWritable) nonwritable.insert(w[1]);
    } else if (op == kOpMemberDecorate && len >= 4 && w[3] == kNonWritable) {
      nonwritable_members[w[1]].insert(w[2]);
    } else if (op == kOpTypeStruct && len >= 2) {
      members[w[1]] = len - 2;
    } else if (op == kOpTypePointer && len >= 4) {
      pointee[w[1]] = w[3];
    } else if (op == kOpVariable && len >= 4) {
      var_type[w[2]] = w[1];  // a pointer type
      variables.push_back(w[2]);
    }
    i += len;
  }
  uint32_t written = ~0u;
  for (uint32_t var : variables) {
    auto b = binding.find(var);
    if (b == binding.end() || b->second >= 32) continue;
    if (auto s = set.find(var); s != set.end() && s->second != 0) continue;
    bool readonly = nonwritable.count(var) > 0;
    if (!readonly) {
      auto ptr = pointee.find(var_type[var]);
      const uint32_t type = ptr == pointee.end() ? 0 : ptr->second;
      auto m = members.find(type);
      auto nw = nonwritable_members.find(type);
      readonly = m != members.end() && m->second > 0 && nw != nonwritable_members.end() && nw->second.size() == m->second;
    }
    if (readonly) written &= ~(1u << b->second);
  }
  return written;
}

PipelineCache::~PipelineCache() {
  const DeviceFns& f = dev_.fn();
  for (auto& [name, p] : pipelines_) {
    f.vkDestroyPipeline(dev_.handle(), p->pipeline, nullptr);
    f.vkDestroyPipelineLayout(dev_.handle(), p->layout, nullptr);
    f.vkDestroyDescriptorSetLayout(dev_.handle(), p->set_layout, nullptr);
  }
}

const Pipeline& PipelineCache::get(std::string_view name, uint32_t n_buffers, uint32_t push_bytes) {
  if (auto it = pipelines_.find(name); it != pipelines_.end()) {
    const Pipeline& p = *it->second;
    if (p.n_buffers != n_buffers || p.push_bytes != push_bytes)
      throw VulkanError(fmt::format("shader {} asked for with {} buffers / {} push bytes, created with {} / {}", name,
                                    n_buffers, push_bytes, p.n_buffers, p.push_bytes));
    return p;
  }
  const ShaderBlob* blob = find_shader(name);
  if (!blob) throw VulkanError(fmt::format("no embedded shader named {}", name));
  if (push_bytes > dev_.info().max_push_constants)
    throw VulkanError(fmt::format("shader {} needs {} push-constant bytes, the device allows {}", name, push_bytes,
                                  dev_.info().max_push_constants));
  const DeviceFns& f = dev_.fn();
  VkDevice d = dev_.handle();
  auto p = std::make_unique<Pipeline>();
  p->name = std::string(name);
  p->n_buffers = n_buffers;
  p->push_bytes = push_bytes;
  p->written = spirv_written_bindings(blob->words, blob->n_words);

  std::vector<VkDescriptorSetLayoutBinding> bindings(n_buffers);
  for (uint32_t i = 0; i < n_buffers; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = n_buffers;
  dl.pBindings = bindings.data();
  vk_check(f.vkCreateDescriptorSetLayout(d, &dl, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout");

  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p->set_layout;
  pl.pushConstantRangeCount = push_bytes ? 1 : 0;
  pl.pPushConstantRanges = &pcr;
  vk_check(f.vkCreatePipelineLayout(d, &pl, nullptr, &p->layout), "vkCreatePipelineLayout");

  VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sm.codeSize = blob->n_words * 4;
  sm.pCode = blob->words;
  VkShaderModule module = VK_NULL_HANDLE;
  vk_check(f.vkCreateShaderModule(d, &sm, nullptr, &module), "vkCreateShaderModule");
  VkComputePipelineCreateInfo cp{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cp.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cp.stage.module = module;
  cp.stage.pName = "main";
  cp.layout = p->layout;
  const VkResult r = f.vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &cp, nullptr, &p->pipeline);
  f.vkDestroyShaderModule(d, module, nullptr);
  vk_check(r, "vkCreateComputePipelines");
  const Pipeline& ref = *p;
  pipelines_.emplace(p->name, std::move(p));
  return ref;
}

}  // namespace clover::vulkan
