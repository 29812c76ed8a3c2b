#include "patch/header.h"

namespace clover::patch::detail {

std::vector<uint8_t> encode_header(const PatchPlan& plan) {
  std::vector<gguf::TableEntry> table;
  for (const auto& t : plan.tensors)
    if (t.action != TensorAction::Drop) table.push_back({&t.in->name, &t.in->dims, t.in->type, t.out_offset});
  return gguf::encode_header(plan.version, plan.metadata, table);
}

}  // namespace clover::patch::detail
