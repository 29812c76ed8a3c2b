// Softmax attention of query rows against a KV cache, tiled over keys with an online softmax.
//
//   o[r] = sum_j softmax_j(scale * q[r] . k[j]) v[j]      over the keys j < n_keys[r]
//
// Every row of one call reads the same KV head (GQA: the query heads of a group, for a run of
// tokens). A row's own key count is its mask: causal rows stop at their position, the rows of a
// denoising block all see the prefix and the whole block. Memory is O(tile), never O(keys): the
// keys are visited in tiles of kAttnKeyTile, each tile converted once per call to f32 and used by
// every row, with a running max, sum and output per row (the "online softmax" of flash attention).
//
// Numerics follow ggml-cpu's non-flash path where it matters for comparing with llama.cpp: the
// query is rounded to the K cache type's activation type before the dot product (f16 for an F16
// cache, Q8_0 blocks for a Q8_0 cache), as ggml_mul_mat does. A row's result depends only on that
// row (its query, its key count and the cache), never on the other rows of the call or on how the
// rows are grouped, so a prefill, a chunked prefill and decode steps give bitwise identical values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace clover::kernels {

constexpr int kAttnKeyTile = 64;  // keys per tile
constexpr int kAttnMaxRows = 32;  // query rows per call

// The keys or the values of one KV head in a cache: position j holds head_dim values of `type`
// (F32, F16 or Q8_0) at data + j * row_stride bytes.
struct KvHeadRef {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  size_t row_stride = 0;
};

// The query rows of one call (at most kAttnMaxRows): row r reads q[r] (head_dim floats), attends to
// keys 0 .. n_keys[r]-1 and writes o[r] (head_dim floats; zeros when n_keys[r] == 0).
struct AttentionRows {
  const float* const* q = nullptr;
  float* const* o = nullptr;
  const int64_t* n_keys = nullptr;
  int n = 0;
};

// Working memory of one thread. For the tiled kernel its size depends on head_dim only, never on
// the context length; the exact path keeps one row of scores.
struct AttentionScratch {
  int head_dim = 0;
  std::vector<float> q;     // [kAttnMaxRows][hd]    rounded queries
  std::vector<float> kt;    // [hdp][kAttnKeyTile]   K tile, transposed
  std::vector<float> vt;    // [kAttnKeyTile][hdp]   V tile (hdp = hd rounded up to 16, zero padded)
  std::vector<float> p;     // [kAttnMaxRows][kAttnKeyTile] scores, then probabilities
  std::vector<float> acc;   // [kAttnMaxRows][hdp]   running output
  std::vector<float> row;   // [16][hdp]             16 converted K rows, before the transpose
  std::vector<float> m, l;  // [kAttnMaxRows]        running max and sum
  std::vector<float> scores;  // exact path: one row's scores (grows to the longest key count seen)
  std::vector<float> lanes;   // exact path: [16][hd] lane accumulators of the value pass
  void reserve(int hd);
};

// The types a KV cache may hold, and whether head_dim suits them (Q8_0 needs multiples of 32).
bool kv_type_supported(DType t);
bool kv_type_fits(DType t, int head_dim);

// Rounds a query row to the activation type of a K cache of type `k_type` (in place).
void round_query(DType k_type, float* q, int head_dim);

// Exact attention: llama.cpp's non-flash attention with an F32 KV cache (its "exact mode"),
// reproduced step for step so that logits compare bit for bit: scores as its kq product sums them
// (ggml_vec_dot_f32: the queries are a permuted view, which tinyBLAS declines), scaled; the softmax terms
// and sum as ggml's soft_max (kernels/vecmath.h), probabilities times float(1 / sum); the output as
// tinyBLAS's kqv product (lane l of each dim takes the keys j = l mod 16 in order, then the tree).
// Two passes over a row's scores, so its scratch grows with the key count (4 bytes a key). Used by
// attention() for F32 caches whose head_dim is a multiple of 16 (attention_exact_fits).
bool attention_exact_fits(const KvHeadRef& k, const KvHeadRef& v, int head_dim);
void attention_exact(const AttentionRows& rows, int head_dim, float scale, const KvHeadRef& k, const KvHeadRef& v,
                     AttentionScratch& scratch);

// Attention on the active instruction set (kernels::isa_active()): the exact path for F32 caches,
// the tiled kernel otherwise.
void attention(const AttentionRows& rows, int head_dim, float scale, const KvHeadRef& k, const KvHeadRef& v,
               AttentionScratch& scratch);

// Scalar reference twin: the same rounding of the query, then a plain two-pass softmax in double.
void attention_ref(const AttentionRows& rows, int head_dim, float scale, const KvHeadRef& k, const KvHeadRef& v);

}  // namespace clover::kernels
