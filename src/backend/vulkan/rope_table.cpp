#include "backend/vulkan/rope_table.h"

#include <cmath>

namespace clover::vulkan {

void rope_table(const int64_t* positions, int64_t tokens, int n_rot, float freq_base, std::vector<float>& out) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  const int half = n_rot / 2;
  out.resize(static_cast<size_t>(tokens) * half * 2);
  for (int64_t t = 0; t < tokens; ++t) {
    float theta = static_cast<float>(positions[t]);
    float* row = out.data() + static_cast<size_t>(t) * half * 2;
    for (int i = 0; i < half; ++i) {
      row[2 * i] = std::cos(theta);
      row[2 * i + 1] = std::sin(theta);
      theta *= theta_scale;
    }
  }
}

}  // namespace clover::vulkan
