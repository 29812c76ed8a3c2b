// Shared pieces of the Vulkan op tests: the device under test (validation on), random inputs,
// NMSE, and a check that the validation layer stayed silent.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/vulkan/commands.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/instance.h"
#include "backend/vulkan/ops.h"
#include "kernels/matmul.h"

namespace clover::vulkan::test {

// Whether the cases run under the Khronos validation layer: always, unless
// CLOVER_VK_TEST_NO_VALIDATION=1 (bench/gpu-check.sh on a machine with a GPU driver but no layer
// installed: the results are still checked against the CPU, the layer's silence is not).
inline bool test_validation() {
  const char* e = std::getenv("CLOVER_VK_TEST_NO_VALIDATION");
  return !(e && std::string(e) == "1");
}

// Each case gets an instance with validation and the device under test: CLOVER_VK_TEST_DEVICE
// (an index) if set, else device 0 (a CPU device such as lavapipe included: a test names it).
// Skips the case when there is no driver or no device; fails it when the validation layer sent
// any message during the case.
class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  Device& dev() { return *device_; }
  const Instance& inst() { return *instance_; }

  std::unique_ptr<Instance> instance_;
  std::unique_ptr<Device> device_;
};

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// A weight matrix of random values in [-scale, scale], stored as `t` (quantised as files are).
struct HostMatrix {
  std::vector<uint8_t> bytes;
  kernels::MatRef ref;
};
HostMatrix random_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed, float scale = 1.0f);

// sum (a - b)^2 / sum b^2 (0 when both are zero).
double nmse(const float* a, const float* ref, size_t n);

// A device buffer holding `v` (Device residency: uploaded through the staging buffer).
Buffer to_device(Device& dev, const void* data, size_t bytes, MemoryPurpose purpose = MemoryPurpose::Scratch);
template <class T>
Buffer to_device(Device& dev, const std::vector<T>& v) {
  return to_device(dev, v.data(), v.size() * sizeof(T));
}
template <class T>
std::vector<T> from_device(Device& dev, const Buffer& b, size_t n) {
  std::vector<T> out(n);
  dev.download(b, 0, out.data(), n * sizeof(T));  // a multiple of 4 bytes in every test
  return out;
}

// Everything a quantised-activation scratch holds, to compare two of them bit for bit.
struct Q8Contents {
  std::vector<uint32_t> quants;
  std::vector<float> scales;
};
inline Q8Contents q8_contents(Device& dev, const Q8Activations& a) {
  return {from_device<uint32_t>(dev, a.quants, static_cast<size_t>(a.quants.size() / 4)),
          from_device<float>(dev, a.scales, static_cast<size_t>(a.scales.size() / 4))};
}

}  // namespace clover::vulkan::test
