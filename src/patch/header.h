// Internal to src/patch: the bytes of a GGUF header (magic, version, counts, metadata, tensor table)
// for a file whose tensor data is written separately. The same encoding as gguf::Writer's; the
// patch writes tensor data itself (copy_file_range), which the Writer's streaming API cannot.
// run_patch() reopens what it wrote with gguf::Reader before renaming it into place, so any
// disagreement with the format is caught there.
#pragma once
#include <cstdint>
#include <vector>

#include "patch/patch.h"

namespace clover::patch::detail {

// Header and tensor table of the plan's OUT, without the padding up to the data section.
std::vector<uint8_t> encode_header(const PatchPlan& plan);

}  // namespace clover::patch::detail
