// The memory of a sequence's caches by formula, and which cache types a model can take: the
// same for every backend (each allocates exactly this; tests/backend/cpu checks the CPU's).
#include <fmt/format.h>

#include "backend/executor.h"
#include "kernels/attention.h"

namespace clover::backend {

namespace {
void check_type(DType t, const char* which, const model::HParams& hp) {
  if (!kernels::kv_type_supported(t))
    throw model::ModelError(fmt::format("{} cache type {} is not supported (use f32, f16 or q8_0)", which, dtype_name(t)));
  if (hp.n_attn_layers() > 0 && !kernels::kv_type_fits(t, hp.head_dim))
    throw model::ModelError(fmt::format("{} cache type {} needs a head dimension that is a multiple of {} (this model: {})", which,
                                        dtype_name(t), dtype_block_size(t), hp.head_dim));
}
}  // namespace

void check_kv_types(const model::HParams& hp, KvTypes types) {
  check_type(types.k, "K", hp);
  check_type(types.v, "V", hp);
}

// n_attn_layers x n_ctx x n_head_kv x (row bytes of head_dim K values + of head_dim V values).
size_t kv_bytes_for(const model::HParams& hp, int64_t n_ctx, KvTypes types) {
  if (hp.n_attn_layers() == 0) return 0;
  const size_t per_pos = (dtype_row_bytes(types.k, hp.head_dim) + dtype_row_bytes(types.v, hp.head_dim)) * hp.n_head_kv;
  return static_cast<size_t>(hp.n_attn_layers()) * static_cast<size_t>(n_ctx) * per_pos;
}

// Per GDN layer: the conv window ((K-1) x qkv channels) and H_v d x d matrices, as floats.
size_t recurrent_bytes_for(const model::HParams& hp) {
  const size_t per_layer = static_cast<size_t>(hp.conv_kernel - 1) * hp.gdn_qkv_dim() +
                           static_cast<size_t>(hp.gdn_v_heads) * hp.gdn_head_dim * hp.gdn_head_dim;
  return static_cast<size_t>(hp.n_gdn_layers()) * per_layer * sizeof(float);
}

}  // namespace clover::backend
