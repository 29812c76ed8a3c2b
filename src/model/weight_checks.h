// Load-time value checks (issue #26): a weight holding Inf or NaN turns every answer into NaN
// logits at the first token; the loader refuses such a file instead, naming the tensor.
//
// What is checked, for every tensor the model binds except the routed experts of a large file:
//   - F32, F16 and BF16 tensors: every value (bit tests, no conversion);
//   - quantised tensors: every block's fp16 scales (d, and dmin / m where the type has one). Their
//     quantised values are small integers and the sub-block scales of the K-quants and IQ4_XS are
//     6-bit integers, so a quantised block is finite exactly when these scales are.
// The routed experts (`*_exps` tensors) are most of a large file's bytes: they are checked only
// when the file is at most kFullCheckFileBytes, because checking them would read the whole file
// at load, before any request needs it.
#pragma once
#include <cstdint>

namespace clover::gguf {
class Reader;
}

namespace clover::model {

constexpr uint64_t kFullCheckFileBytes = uint64_t(4) << 30;

// Throws ModelError naming the first tensor holding a non-finite value (and the element or block).
void check_finite_weights(const gguf::Reader& r);

}  // namespace clover::model
