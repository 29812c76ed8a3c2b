// The cos/sin table rope_neox.comp reads: for each token, pair i of n_rot / 2 gets the angle
// pos * theta_scale^i, accumulated by repeated float products exactly as model::ops::rope_neox
// (and ggml's rope cache) does, then std::cos / std::sin on the host, so the GPU rotates with the
// CPU's factors. [tokens][n_rot / 2][2] floats: {cos, sin}.
#pragma once
#include <cstdint>
#include <vector>

namespace clover::vulkan {

void rope_table(const int64_t* positions, int64_t tokens, int n_rot, float freq_base, std::vector<float>& out);

}  // namespace clover::vulkan
