#include "backend/vulkan/vk_test_util.h"

#include <cstdlib>

#include "kernels/convert.h"

namespace clover::vulkan::test {

void VulkanTest::SetUp() {
  std::string error;
  InstanceOptions opt;
  opt.validate = test_validation();
  instance_ = Instance::create(opt, error);
  if (!instance_) GTEST_SKIP() << "no Vulkan: " << error;
  if (instance_->devices().empty()) GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers for lavapipe)";
  int index = 0;
  if (const char* e = std::getenv("CLOVER_VK_TEST_DEVICE")) index = std::atoi(e);
  device_ = std::make_unique<Device>(*instance_, index);
}

void VulkanTest::TearDown() {
  device_.reset();  // destruction is checked too: leaked objects are reported here
  if (instance_ && test_validation()) {
    EXPECT_TRUE(instance_->validation());
    EXPECT_TRUE(instance_->validation_layer_active()) << "the validation layer never reported itself active";
    EXPECT_EQ(instance_->validation_messages(), 0u) << "the validation layer reported problems (printed above)";
  }
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

HostMatrix random_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed, float scale) {
  HostMatrix m;
  const size_t row_bytes = dtype_row_bytes(t, cols);
  m.bytes.resize(row_bytes * rows);
  const std::vector<float> v = random_floats(static_cast<size_t>(rows * cols), seed, -scale, scale);
  for (int64_t r = 0; r < rows; ++r) kernels::quantize_row(t, v.data() + r * cols, m.bytes.data() + r * row_bytes, cols);
  m.ref = {t, m.bytes.data(), rows, cols, row_bytes};
  return m;
}

double nmse(const float* a, const float* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den == 0 ? num : num / den;
}

Buffer to_device(Device& dev, const void* data, size_t bytes, MemoryPurpose purpose) {
  Buffer b = dev.create_buffer(bytes, purpose);
  std::vector<uint8_t> padded(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  padded.resize(b.size(), 0);
  dev.upload(b, 0, padded.data(), padded.size());
  return b;
}

}  // namespace clover::vulkan::test
