#include "backend/vulkan/pipeline.h"

#include <fmt/format.h>

#include <vector>

#include "backend/vulkan/device.h"

namespace clover::vulkan {

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
