#include "backend/vulkan/executor/device_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace clover::vulkan {

bool device_supports(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::IQ4_NL: case DType::Q2_K: case DType::Q3_K: case DType::Q4_K:
    case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

std::string_view device_supported_list() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS";
}

namespace {

int count_marked(const std::vector<bool>& v) { return static_cast<int>(std::count(v.begin(), v.end(), true)); }

class Uploader {
 public:
  Uploader(Device& dev, DeviceWeights& w, uint64_t total, const std::function<void(uint64_t, uint64_t)>& progress)
      : dev_(dev), w_(w), total_(total), progress_(progress) {}

  DeviceMatrix matrix(const kernels::MatRef& m, const std::string& what) {
    check(m.type, what);
    Buffer& b = make(device_matrix_bytes(m));
    DeviceMatrix d = upload_matrix(dev_, m, b, 0);
    done(device_matrix_bytes(m));
    return d;
  }
  // The experts `skip` does not mark (empty: all), back to back.
  DeviceExperts experts(const model::ExpertsRef& e, int n_expert, const std::vector<bool>& skip, const std::string& what) {
    check(e.first.type, what);
    std::vector<kernels::MatRef> mats;
    for (int i = 0; i < n_expert; ++i) mats.push_back(e.expert(i));
    const uint64_t bytes = device_experts_bytes(e.first, n_expert - count_marked(skip));
    Buffer& b = make(bytes);
    DeviceExperts d = upload_experts(dev_, mats.data(), n_expert, b, 0, skip);
    done(bytes);
    return d;
  }
  const Buffer* vec(const std::vector<float>& v) {
    Buffer& b = make(v.size() * sizeof(float));
    dev_.upload(b, 0, v.data(), v.size() * sizeof(float));
    done(v.size() * sizeof(float));
    return &b;
  }
  const Buffer* vec(const float* p, int64_t n) { return vec(std::vector<float>(p, p + n)); }

 private:
  static void check(DType t, const std::string& what) {
    if (!device_supports(t))
      throw VulkanError(fmt::format("{} is {}: the Vulkan backend has matmul shaders for {} only (run this file "
                                    "with --device cpu)",
                                    what, dtype_name(t), device_supported_list()));
  }
  Buffer& make(uint64_t bytes) {
    w_.buffers.push_back(std::make_unique<Buffer>(dev_.create_buffer(std::max<uint64_t>(bytes, 4), MemoryPurpose::Weights)));
    w_.bytes += w_.buffers.back()->allocated();
    return *w_.buffers.back();
  }
  void done(uint64_t bytes) {
    done_ += bytes;
    if (progress_) progress_(done_, total_);
  }
  Device& dev_;
  DeviceWeights& w_;
  uint64_t total_, done_ = 0;
  const std::function<void(uint64_t, uint64_t)>& progress_;
};

// Layer il's experts in RAM (empty: none).
const std::vector<bool>& on_host(const ExpertsOnHost& experts_on_host, int il) {
  static const std::vector<bool> none;
  return il < static_cast<int>(experts_on_host.size()) ? experts_on_host[il] : none;
}

uint64_t total_bytes(const model::Model& model, const ExpertsOnHost& experts_on_host, int first_layer) {
  const model::HParams& hp = model.hp();
  const model::ModelWeights& W = model.weights();
  uint64_t n = device_matrix_bytes(W.output) + 4ull * hp.n_embd;
  for (int il = first_layer; il < hp.n_layer; ++il) {
    const model::LayerWeights& L = W.layers[il];
    n += 8ull * hp.n_embd;
    if (L.recurrent) {
      for (const auto* m : {&L.gdn.qkv, &L.gdn.gate, &L.gdn.beta, &L.gdn.alpha, &L.gdn.out}) n += device_matrix_bytes(*m);
      if (hp.has_reverse_path) n += device_matrix_bytes(L.gdn.rev_beta) + device_matrix_bytes(L.gdn.rev_alpha);
    } else
      for (const auto* m : {&L.attn.q, &L.attn.k, &L.attn.v, &L.attn.o}) n += device_matrix_bytes(*m);
    for (const auto* m : {&L.moe.router, &L.moe.shared_gate_inp, &L.moe.shared_gate, &L.moe.shared_up, &L.moe.shared_down})
      n += device_matrix_bytes(*m);
    const int n_dev = hp.n_expert - count_marked(on_host(experts_on_host, il));
    if (n_dev > 0)
      for (const auto* e : {&L.moe.gate, &L.moe.up, &L.moe.down}) n += device_experts_bytes(e->first, n_dev);
  }
  return n;
}

}  // namespace

DeviceWeights upload_weights(Device& dev, const model::Model& model, const ExpertsOnHost& experts_on_host,
                             int first_layer, const std::function<void(uint64_t, uint64_t)>& progress) {
  const model::HParams& hp = model.hp();
  const model::ModelWeights& W = model.weights();
  DeviceWeights w;
  Uploader up(dev, w, total_bytes(model, experts_on_host, first_layer), progress);
  for (int il = 0; il < hp.n_layer; ++il) {
    const model::LayerWeights& L = W.layers[il];
    const std::string at = fmt::format("layer {} ", il);
    DeviceLayer d;
    d.recurrent = L.recurrent;
    if (il < first_layer) {  // runs on the CPU
      w.layers.push_back(d);
      continue;
    }
    d.attn_norm = up.vec(L.attn_norm, hp.n_embd);
    d.post_norm = up.vec(L.post_norm, hp.n_embd);
    if (L.recurrent) {
      const model::GdnWeights& G = L.gdn;
      d.qkv = up.matrix(G.qkv, at + "ssm qkv");
      d.gate = up.matrix(G.gate, at + "ssm gate");
      d.beta = up.matrix(G.beta, at + "ssm beta");
      d.alpha = up.matrix(G.alpha, at + "ssm alpha");
      d.out = up.matrix(G.out, at + "ssm out");
      d.conv1d = up.vec(G.conv1d, static_cast<int64_t>(hp.gdn_qkv_dim()) * hp.conv_kernel);
      std::vector<float> params(G.dt_bias, G.dt_bias + hp.gdn_v_heads);
      params.insert(params.end(), G.a, G.a + hp.gdn_v_heads);
      d.params = up.vec(params);
      d.norm = up.vec(G.norm, hp.gdn_head_dim);
      if (hp.has_reverse_path) {
        d.rev_beta = up.matrix(G.rev_beta, at + "ssm rev beta");
        d.rev_alpha = up.matrix(G.rev_alpha, at + "ssm rev alpha");
        std::vector<float> rev(G.rev_dt_bias, G.rev_dt_bias + hp.gdn_v_heads);
        rev.insert(rev.end(), G.rev_a, G.rev_a + hp.gdn_v_heads);
        d.rev_params = up.vec(rev);
      }
    } else {
      const model::AttentionWeights& A = L.attn;
      d.q = up.matrix(A.q, at + "attn q");
      d.k = up.matrix(A.k, at + "attn k");
      d.v = up.matrix(A.v, at + "attn v");
      d.o = up.matrix(A.o, at + "attn output");
      d.q_norm = up.vec(A.q_norm, hp.head_dim);
      d.k_norm = up.vec(A.k_norm, hp.head_dim);
    }
    const model::MoeWeights& M = L.moe;
    d.router = up.matrix(M.router, at + "router");
    d.shared_gate_inp = up.matrix(M.shared_gate_inp, at + "shared expert gate");
    d.shared_gate = up.matrix(M.shared_gate, at + "shared expert gate proj");
    d.shared_up = up.matrix(M.shared_up, at + "shared expert up proj");
    d.shared_down = up.matrix(M.shared_down, at + "shared expert down proj");
    d.expert_on_host = on_host(experts_on_host, il);
    if (!d.expert_on_host.empty() && static_cast<int>(d.expert_on_host.size()) != hp.n_expert)
      throw VulkanError(fmt::format("a placement of {} experts for layer {} of {}", d.expert_on_host.size(), il, hp.n_expert));
    d.n_host_experts = count_marked(d.expert_on_host);
    d.experts_on_device = d.n_host_experts < hp.n_expert;
    w.n_host_experts += d.n_host_experts, w.n_experts += hp.n_expert;
    for (const auto* e : {&M.gate, &M.up, &M.down}) w.host_expert_bytes += device_experts_bytes(e->first, d.n_host_experts);
    if (d.experts_on_device) {
      d.gate_exps = up.experts(M.gate, hp.n_expert, d.expert_on_host, at + "expert gate");
      d.up_exps = up.experts(M.up, hp.n_expert, d.expert_on_host, at + "expert up");
      d.down_exps = up.experts(M.down, hp.n_expert, d.expert_on_host, at + "expert down");
    }
    w.layers.push_back(d);
  }
  w.output_norm = up.vec(W.output_norm, hp.n_embd);
  w.output = up.matrix(W.output, "output (LM head)");
  return w;
}

}  // namespace clover::vulkan
