// The per-tensor type rules of llama-quantize's presets (docs/quantize.md lists them and why).
#include "quantize/mixture.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <stdexcept>

namespace clover::quantize {

namespace {

// llama_ftype numbers (llama.h).
constexpr std::array<Preset, 15> kPresets = {{
    {"Q4_0", 2, DType::Q4_0},
    {"Q4_1", 3, DType::Q4_1},
    {"Q8_0", 7, DType::Q8_0},
    {"Q5_0", 8, DType::Q5_0},
    {"Q5_1", 9, DType::Q5_1},
    {"Q2_K", 10, DType::Q2_K},
    {"Q3_K_S", 11, DType::Q3_K},
    {"Q3_K_M", 12, DType::Q3_K},
    {"Q4_K_S", 14, DType::Q4_K},
    {"Q4_K_M", 15, DType::Q4_K},
    {"Q5_K_S", 16, DType::Q5_K},
    {"Q5_K_M", 17, DType::Q5_K},
    {"Q6_K", 18, DType::Q6_K},
    {"IQ4_NL", 25, DType::IQ4_NL},
    {"IQ4_XS", 30, DType::IQ4_XS},
}};

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i] >= 'a' && a[i] <= 'z' ? static_cast<char>(a[i] - 'a' + 'A') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// ggml_n_dims: trailing dimensions of 1 do not count ({E, 1} is a vector).
int n_dims(const std::vector<int64_t>& dims) {
  int n = static_cast<int>(dims.size());
  while (n > 1 && dims[n - 1] == 1) --n;
  return n;
}

// The layers that keep more bits in the _M presets: the first and last eighth, and every third
// layer in between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int layer_of(const std::string& name) {
  int il = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &il) != 1) return -1;
  return il;
}

// llama-quantize's replacement when a row is not a whole number of 256-value super-blocks.
DType fallback(DType t) {
  switch (t) {
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    case DType::Q6_K: return DType::Q8_0;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_XS: return DType::IQ4_NL;
    default: return t;
  }
}

}  // namespace

std::optional<Preset> preset_from_name(std::string_view name) {
  for (const Preset& p : kPresets)
    if (same_name(name, p.name)) return p;
  return std::nullopt;
}

std::vector<Preset> all_presets() { return {kPresets.begin(), kPresets.end()}; }

std::optional<Preset> matching_preset(const std::vector<TensorDesc>& tensors, int n_layer, int n_expert, int n_gqa) {
  for (const Preset& p : kPresets) {
    std::vector<DType> types;
    try {
      types = plan_types(p, tensors, n_layer, n_expert, n_gqa);
    } catch (const std::invalid_argument&) {
      continue;  // this preset cannot describe the file's shapes
    }
    bool same = true;
    for (size_t i = 0; i < tensors.size() && same; ++i) same = types[i] == tensors[i].type;
    if (same) return p;
  }
  return std::nullopt;
}

std::string preset_names() {
  std::string s;
  for (const Preset& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::string_view presets_not_supported() { return "Q3_K_L, Q2_K_S and the IQ1/IQ2/IQ3 presets (their rules or block types are not implemented)"; }

bool is_quantisable(const TensorDesc& t) {
  const std::string& n = t.name;
  if (n.size() < 6 || n.compare(n.size() - 6, 6, "weight") != 0) return false;
  if (n_dims(t.dims) < 2) return false;
  if (has(n, "_norm.weight")) return false;
  if (has(n, "ffn_gate_inp.weight")) return false;  // expert router: stays as it is
  if (has(n, "ssm_conv1d.weight")) return false;
  return true;
}

std::vector<DType> plan_types(const Preset& p, const std::vector<TensorDesc>& tensors, int n_layer, int n_expert,
                              int n_gqa) {
  const std::string_view ft = p.name;
  const bool q4_k_m = ft == "Q4_K_M", q5_k_m = ft == "Q5_K_M", q4_k_s = ft == "Q4_K_S", iq4_nl = ft == "IQ4_NL" || ft == "IQ4_XS";
  const bool q2_k = ft == "Q2_K", q3_k_s = ft == "Q3_K_S", q3_k_m = ft == "Q3_K_M";
  // Counted over the whole file first, as llama-quantize does.
  int n_attention_wv = 0;
  bool has_output = false;
  for (const auto& t : tensors) {
    if (has(t.name, "attn_v.weight") || has(t.name, "attn_qkv.weight") || has(t.name, "attn_kv_b.weight")) ++n_attention_wv;
    if (t.name == "output.weight") has_output = true;
  }
  int i_attention_wv = 0, i_ffn_down = 0;
  std::vector<DType> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (!is_quantisable(t)) {
      out.push_back(t.type);
      continue;
    }
    const std::string& n = t.name;
    DType ty = p.base;
    if (n == "output.weight" || (!has_output && n == "token_embd.weight")) {
      // The head is the most sensitive matrix: 6 bits (8 when its rows do not fit super-blocks).
      ty = t.dims[0] % kQK_K != 0 ? DType::Q8_0 : ty != DType::Q8_0 ? DType::Q6_K : ty;
    } else if (n == "token_embd.weight") {
      // base type
    } else if (has(n, "attn_v.weight")) {
      if (q2_k) ty = n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
      else if (q3_k_m) ty = i_attention_wv < 2 ? DType::Q5_K : DType::Q4_K;
      else if ((q4_k_m || q5_k_m) && use_more_bits(i_attention_wv, n_attention_wv)) ty = DType::Q6_K;
      else if (q4_k_s && i_attention_wv < 4) ty = DType::Q5_K;
      else if (iq4_nl && n_gqa >= 4) ty = DType::Q5_K;  // one V head serves 4+ query heads
      if (n_expert == 8) ty = DType::Q8_0;
      ++i_attention_wv;
    } else if (has(n, "attn_k.weight")) {
      if (n_expert == 8) ty = DType::Q8_0;
    } else if (has(n, "ffn_down")) {
      // Expert models count layers by name (experts and shared experts of a layer share it).
      int il = i_ffn_down;
      if (n_expert > 1) {
        il = layer_of(n);
        if (il < 0 || il >= n_layer) throw std::invalid_argument(fmt::format("tensor {}: no layer number in range", n));
      }
      if (q2_k) ty = DType::Q3_K;
      else if (q3_k_m) ty = il < n_layer / 16 ? DType::Q5_K : DType::Q4_K;  // (Q3_K only for Falcon)
      else if ((q4_k_m || q5_k_m) && use_more_bits(il, n_layer)) ty = DType::Q6_K;
      else if ((q4_k_s || iq4_nl) && il < n_layer / 8) ty = DType::Q5_K;
      ++i_ffn_down;
    } else if (has(n, "attn_output.weight")) {
      if (n_expert == 8) {
        if (q4_k_s || q4_k_m || iq4_nl || q2_k || q3_k_s || q3_k_m) ty = DType::Q5_K;
      } else if (q2_k) {
        ty = DType::Q3_K;
      } else if (q3_k_m) {
        ty = DType::Q4_K;
      }
    } else if (has(n, "attn_qkv.weight")) {
      if (q3_k_m) ty = DType::Q4_K;
      else if (q4_k_m) ty = DType::Q5_K;
      else if (q5_k_m) ty = DType::Q6_K;
    }
    if (t.dims[0] % dtype_block_size(ty) != 0) ty = fallback(ty);
    if (t.dims[0] % dtype_block_size(ty) != 0) ty = DType::F16;  // llama-quantize's last resort
    out.push_back(ty);
  }
  return out;
}

}  // namespace clover::quantize
