// llama-quantize's presets (file types) and the type each tensor gets under them.
//
// A preset names a base type and rules that give some tensors more bits (the output head, the
// attention value and fused qkv projections, the FFN down projections of some layers), written
// down with their reasons in docs/quantize.md. `clover quantize` and `clover synth --type` use
// the same rules, and `clover inspect` names the preset a file's tensor types match.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"

namespace clover::quantize {

struct Preset {
  std::string_view name;  // as llama-quantize spells it: "Q4_K_M"
  uint32_t file_type;     // general.file_type (llama_ftype)
  DType base;             // the type of every quantised tensor no rule changes
};

// Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q6_K, Q3_K_M, Q3_K_S, Q2_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// IQ4_XS (case-insensitive); nullopt
// otherwise.
std::optional<Preset> preset_from_name(std::string_view name);
// Every preset name, and those llama-quantize has that this engine cannot write yet (their
// types are missing), for error messages.
std::string preset_names();
std::string_view presets_not_supported();

// A tensor of the file, as the rules see it.
struct TensorDesc {
  std::string name;
  std::vector<int64_t> dims;  // ne0 first
  DType type;                 // the type it has in the input
};

// The types of all tensors of a file under a preset, in file order. `n_layer` and `n_expert`
// come from the file's hyperparameters. Tensors that are not quantised (1-D tensors, norms,
// router weights, the GDN convolution) keep their type. Rows that are not a whole number of
// 256-value super-blocks take llama-quantize's fallbacks (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
// Q2_K / Q3_K / IQ4_XS -> IQ4_NL).
// Throws std::invalid_argument naming the tensor when a rule cannot be applied.
// `n_gqa` (query heads per KV head) only matters to the attn_v rules of IQ4_NL / IQ4_XS and Q2_K.
std::vector<DType> plan_types(const Preset& p, const std::vector<TensorDesc>& tensors, int n_layer, int n_expert,
                              int n_gqa = 1);

// All presets, in llama_ftype order.
std::vector<Preset> all_presets();
// The preset whose rules give exactly these tensor types (nullopt: none does).
std::optional<Preset> matching_preset(const std::vector<TensorDesc>& tensors, int n_layer, int n_expert, int n_gqa = 1);

// Whether llama-quantize would quantise this tensor at all.
bool is_quantisable(const TensorDesc& t);

}  // namespace clover::quantize
