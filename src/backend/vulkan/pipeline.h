// Compute pipelines from the SPIR-V embedded in the binary (shaders/, compiled by glslc at build
// time), created once per device and kept by name. Every shader of the backend has the same kind
// of interface: storage buffers at bindings 0..n-1 of set 0 and one push-constant block.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "backend/vulkan/loader.h"

namespace clover::vulkan {

class Device;

// One embedded SPIR-V module (generated: shaders_embedded.cpp).
struct ShaderBlob {
  const char* name;  // the .comp file's name, plus a variant suffix ("matmul_q4_0")
  const uint32_t* words;
  size_t n_words;
};
// nullptr when no shader has that name.
const ShaderBlob* find_shader(std::string_view name);
// Every embedded shader (for the test that creates each pipeline once under validation).
const ShaderBlob* all_shaders(size_t& count);

// The storage-buffer bindings of set 0 a SPIR-V module may write: bit b set unless binding b is
// decorated NonWritable (GLSL `readonly`), on its variable or on every member of its block. A
// binding the module does not declare counts as written (nothing is assumed of it). Throws
// VulkanError for words that are not a SPIR-V module.
uint32_t spirv_written_bindings(const uint32_t* words, size_t n_words);

struct Pipeline {
  std::string name;
  uint32_t n_buffers = 0;
  uint32_t push_bytes = 0;
  uint32_t written = ~0u;  // spirv_written_bindings: what a dispatch of it may write (CommandList's hazards)
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

class PipelineCache {
 public:
  explicit PipelineCache(Device& dev) : dev_(dev) {}
  ~PipelineCache();
  // The pipeline of shader `name` with n_buffers storage buffers and push_bytes of push
  // constants; created on first use. Throws VulkanError for an unknown name or a mismatch with
  // the first request of the same name.
  const Pipeline& get(std::string_view name, uint32_t n_buffers, uint32_t push_bytes);

 private:
  Device& dev_;
  std::map<std::string, std::unique_ptr<Pipeline>, std::less<>> pipelines_;
};

}  // namespace clover::vulkan
