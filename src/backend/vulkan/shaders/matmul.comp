#version 450
// y = W x for a chunk of weight rows: the twin of kernels::matmul_ref (src/kernels/matmul.h)
// and, with EXPERTS, of kernels::matmul_selected as the MoE layer uses it (model/moe.cpp). One
// variant per weight type: WTYPE_F32, WTYPE_F16, WTYPE_BF16 (widened with a shift: no device
// bf16 support needed), the blocks of 32 WTYPE_Q8_0, WTYPE_Q4_0, WTYPE_Q4_1, WTYPE_Q5_0,
// WTYPE_Q5_1, WTYPE_IQ4_NL and the super-blocks of 256 WTYPE_Q2_K, WTYPE_Q3_K, WTYPE_Q4_K,
// WTYPE_Q5_K, WTYPE_Q6_K, WTYPE_IQ4_XS (layouts: kernels/dtype.h; read from the raw bytes, which
// need not be word aligned: 20-, 22-, 110-, 210-byte blocks).
//
// Dense grid: x = group of 256 / lanes output rows within the chunk (the host splits W into
// chunks that fit one binding and 65,535 workgroups), y = group of 32 activation rows, walked in
// tiles of 8 (rows_times_weights: quantised rows of up to 64 blocks are decoded once for all 32). A workgroup
// of 256 holds 256 / lanes rows of `lanes` invocations each (push `lanes`, ops_internal.h
// matmul_lanes: a power of two up to 64, one per block of 32 or per value of a row): each row's sum
// is what a workgroup of its own would give (the same blocks per invocation, the same tree), with
// fewer workgroups to launch (the H200 run: a 4096 x 2048 Q4_0 mat-vec, one workgroup per row,
// moved ~90-290 GB/s) and no idle invocations on short rows.
// EXPERTS grid: x = group of 256 / lanes output rows, y = the y-th expert of the chunk that has routed rows (the active
// list moe_group.comp writes, on the device: no host round trip); the host launches at most as
// many y as the pass has routed rows (8 for a decode step, not the layer's 256 experts), and a y
// past the chunk's active experts exits at once. The workgroup walks the rows routed to its expert
// in tiles of 8; quantised rows of up to 64 blocks (every expert of the 35B) are decoded once into
// registers for all of them, so an expert's weights are read once per pass (longer rows and float
// weights: once per 8 routed rows, rows_times_weights).
//
// Each of a row's `lanes` invocations takes every lanes-th element (float weights) or block of 32
// (quantised weights) of the row; the partial sums meet in a shared-memory tree (no subgroup
// operations: the result does not depend on the subgroup size).
//
// Activations are rounded as the CPU rounds them: F16 / BF16 weights see fp16- / bf16-rounded
// activations;
// quantised weights see the activation blocks the CPU gives them (ops.h, activation_kind): Q8_0
// from quantize_q8_0_activation.comp; Q8_1 (Q4_1, Q5_1: Q8_0 plus s = fp16(d x sum of the
// quants), for the offset term m_w * s); Q8_K from quantize_q8_k_activation.comp (K-quants,
// IQ4_XS: one scale per 256, stored per block of 32 as Q8_0's). Integer products per block of
// 32, then d_w * d_x * sum as float (plus the offset term for the types with one).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;  // (256 / lanes) rows x lanes

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
// Float weights: x is [rows][x_stride] floats. Quantised: x is [rows][nb][8] words of int8
// quants and xs [rows][nb] float scales.
layout(std430, binding = 1) readonly buffer Acts { uint x[]; };
layout(std430, binding = 2) readonly buffer ActScales { float xs[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };
#if defined(EXPERTS)
// count [n_expert], first [n_expert], token of each routed row [rows], row of each (token, slot).
layout(std430, binding = 4) readonly buffer Groups { int grp[]; };
#endif

layout(push_constant) uniform Push {
  uint rows;      // weight rows in this chunk (per expert with EXPERTS)
  uint cols;
  uint n_act;     // activation rows (dense)
  uint w_base;    // byte offset of the chunk's first row inside the W binding
  uint w_stride;  // bytes between weight rows
  uint x_stride;  // floats between activation rows (float weights)
  uint y_stride;  // floats between output rows: y[r * y_stride + o0 + o]
  uint o0;        // first output index of the chunk
  uint e0;            // EXPERTS: first expert of the chunk
  uint n_expert;      // EXPERTS: experts in the groups buffer
  uint expert_stride; // EXPERTS: bytes between experts' matrices
  uint gather;        // EXPERTS: 1: activation row = token of the routed row; 0: the routed row
  uint n_chunk;       // EXPERTS: experts of this dispatch's chunk (e0 .. e0 + n_chunk - 1)
  uint active_off;    // EXPERTS: the groups' n_active; the active list follows it
  uint lanes;         // invocations per output row: a power of two, 1..64
} p;

#if !defined(WTYPE_F32) && !defined(WTYPE_F16) && !defined(WTYPE_BF16)
#define BLOCK_WEIGHTS 1  // blocks of 32 integer quants with scales (or super-blocks of 256)
#endif
#if defined(WTYPE_Q4_1) || defined(WTYPE_Q5_1)
#define Q8_1_ACTS 1  // Q8_1 activations: xs holds (d, s) per block, s = fp16(d x sum of the quants)
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
#define HAS_MIN 1  // value = dw * q + mw: the mw term needs the sums of the activation quants
#elif defined(WTYPE_Q2_K)
#define MIN16 1  // value = dw * q + mw * m16: an integer min per 16 values (m0 for 0..15, m1 for 16..31)
#endif
#if defined(WTYPE_IQ4_NL) || defined(WTYPE_IQ4_XS)
// IQ4_NL's 16 levels (kernels::kIq4nlValues: part of the file format).
const int kIq4nl[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#endif

const uint NINV = 256;  // invocations per workgroup (ops_internal.h kMatmulInvocations)
const uint TILE = 8;
const uint ACT_ROWS_PER_GROUP = 32;  // dense: activation rows per workgroup (ops_internal.h kMatmulActRows)
shared float partial[TILE][NINV];

#if defined(BLOCK_WEIGHTS)
// The 16 bytes at byte `off` as 4 little-endian words: 4 or 5 word loads instead of one per byte.
// `off` is even: every block size is (18, 20, 22, 24, 34; 84, 110, 136, 144, 176, 210 bytes), and
// so is the start of every row.
void load16(uint off, out uint wd[4]) {
  const uint i = off >> 2;
  if ((off & 2u) == 0u) {
    for (uint k = 0; k < 4u; ++k) wd[k] = w[i + k];
  } else {
    uint prev = w[i];
    for (uint k = 0; k < 4u; ++k) {
      const uint next = w[i + k + 1u];
      wd[k] = (prev >> 16) | (next << 16);
      prev = next;
    }
  }
}
// The 32 bytes at even byte `off` as 8 words.
void load32(uint off, out uint wd[8]) {
  uint a[4], b[4];
  load16(off, a);
  load16(off + 16u, b);
  for (uint k = 0; k < 4u; ++k) {
    wd[k] = a[k];
    wd[k + 4u] = b[k];
  }
}
// Byte j of words loaded by load16 / load32.
#define WD_BYTE(wd, j) ((wd[(j) >> 2] >> (((j) & 3u) * 8u)) & 0xffu)
#endif

#if defined(BLOCK_WEIGHTS)
// Sub-block b of 32 values of a weight row, decoded: value j = dw * q[j] + mw (mw = 0 for the
// symmetric types; MIN16: + mw * m0 for values 0..15, mw * m1 for 16..31). The sub-block scales of
// the K-quants and IQ4_XS are folded into q[] (exact: |q| x 32 x 127 stays below 2^24, so the
// integer sums convert to float exactly).
struct Block {
  int q[32];
  float dw, mw;
  int m0, m1;
};

Block decode_block(uint row_off, uint b) {
  int q[32];
  float dw, mw = 0.0;
  int m0 = 0, m1 = 0;
#if defined(WTYPE_Q8_0)
  const uint boff = row_off + b * 34u;
  dw = f16_to_f32(U16_AT(w, boff));
  uint wd[4];
  for (uint h = 0; h < 2u; ++h) {
    load16(boff + 2u + 16u * h, wd);
    for (uint j = 0; j < 16u; ++j) q[16u * h + j] = int(WD_BYTE(wd, j) << 24) >> 24;
  }
#elif defined(WTYPE_Q4_0) || defined(WTYPE_IQ4_NL)
  const uint boff = row_off + b * 18u;
  dw = f16_to_f32(U16_AT(w, boff));
  uint wd[4];
  load16(boff + 2u, wd);
  for (uint j = 0; j < 16u; ++j) {
    const uint byte = WD_BYTE(wd, j);
#if defined(WTYPE_Q4_0)
    q[j] = int(byte & 15u) - 8;        // low nibbles: values 0..15
    q[j + 16u] = int(byte >> 4) - 8;   // high nibbles: values 16..31
#else
    q[j] = kIq4nl[byte & 15u];
    q[j + 16u] = kIq4nl[byte >> 4];
#endif
  }
#elif defined(WTYPE_Q4_1)
  const uint boff = row_off + b * 20u;
  dw = f16_to_f32(U16_AT(w, boff));
  mw = f16_to_f32(U16_AT(w, boff + 2u));
  uint wd[4];
  load16(boff + 4u, wd);
  for (uint j = 0; j < 16u; ++j) {
    const uint byte = WD_BYTE(wd, j);
    q[j] = int(byte & 15u);
    q[j + 16u] = int(byte >> 4);
  }
#elif defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
#if defined(WTYPE_Q5_0)
  const uint boff = row_off + b * 22u, qh_off = boff + 2u;
#else
  const uint boff = row_off + b * 24u, qh_off = boff + 4u;
  mw = f16_to_f32(U16_AT(w, boff + 2u));
#endif
  dw = f16_to_f32(U16_AT(w, boff));
  const uint qh = U16_AT(w, qh_off) | (U16_AT(w, qh_off + 2u) << 16);  // bit j: bit 4 of value j
  uint wd[4];
  load16(qh_off + 4u, wd);
  for (uint j = 0; j < 16u; ++j) {
    const uint byte = WD_BYTE(wd, j);
    q[j] = int((byte & 15u) | (((qh >> j) & 1u) << 4));
    q[j + 16u] = int((byte >> 4) | (((qh >> (j + 16u)) & 1u) << 4));
#if defined(WTYPE_Q5_0)
    q[j] -= 16;
    q[j + 16u] -= 16;
#endif
  }
#elif defined(WTYPE_Q2_K)
  // Super-block b / 8 (84 bytes: scales[16], qs[64], d, dmin); sub-block j = b % 8 reads the 2-bit
  // field 2 (j % 4) of qs[32 (j / 4) + l]; its values 0..15 use scales[2 j], 16..31 scales[2 j + 1],
  // each a 4-bit scale (low) and a 4-bit min (high): value = d * sc * q - dmin * m (kquant_low.h).
  const uint soff = row_off + (b >> 3) * 84u, j = b & 7u, shift = 2u * (j & 3u);
  const uint s0 = BYTE_AT(w, soff + 2u * j), s1 = BYTE_AT(w, soff + 2u * j + 1u);
  dw = f16_to_f32(U16_AT(w, soff + 80u));
  mw = -f16_to_f32(U16_AT(w, soff + 82u));
  m0 = int(s0 >> 4);
  m1 = int(s1 >> 4);
  uint qw[8];
  load32(soff + 16u + 32u * (j >> 2), qw);
  for (uint l = 0; l < 32u; ++l) q[l] = int(((l < 16u ? s0 : s1) & 15u) * ((WD_BYTE(qw, l) >> shift) & 3u));
#elif defined(WTYPE_Q3_K)
  // Super-block b / 8 (110 bytes: hmask[32], qs[64], scales[12], d); sub-block j = b % 8 reads the
  // 2-bit field 2 (j % 4) of qs[32 (j / 4) + l] and bit j of hmask[l] (clear: minus 4); its values
  // 0..15 use 6-bit scale 2 j, 16..31 scale 2 j + 1 (low 4 bits from scales[is] or its high nibble
  // scales[is - 8], high 2 bits from scales[8 + is % 4]), minus 32: value = d * sc * q.
  const uint soff = row_off + (b >> 3) * 110u, j = b & 7u, shift = 2u * (j & 3u);
  dw = f16_to_f32(U16_AT(w, soff + 108u));
  int sc[2];
  for (uint h = 0; h < 2u; ++h) {
    const uint is = 2u * j + h;
    const uint lo = is < 8u ? BYTE_AT(w, soff + 96u + is) & 15u : BYTE_AT(w, soff + 88u + is) >> 4;
    const uint hi = (BYTE_AT(w, soff + 104u + (is & 3u)) >> (2u * (is >> 2))) & 3u;
    sc[h] = int(lo | (hi << 4)) - 32;
  }
  uint qw[8], hm[8];
  load32(soff + 32u + 32u * (j >> 2), qw);
  load32(soff, hm);
  for (uint l = 0; l < 32u; ++l) {
    const int v = int((WD_BYTE(qw, l) >> shift) & 3u) - (((WD_BYTE(hm, l) >> j) & 1u) != 0u ? 0 : 4);
    q[l] = sc[l >> 4] * v;
  }
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
  // Super-block b / 8, sub-block j = b % 8: value = d * sc_j * q - dmin * m_j (kquant.h).
#if defined(WTYPE_Q4_K)
  const uint soff = row_off + (b >> 3) * 144u, qs_off = soff + 16u;
#else
  const uint soff = row_off + (b >> 3) * 176u, qs_off = soff + 48u;
#endif
  const uint j = b & 7u;
  uint sc, mn;
  if (j < 4u) {
    sc = BYTE_AT(w, soff + 4u + j) & 63u;
    mn = BYTE_AT(w, soff + 8u + j) & 63u;
  } else {
    const uint s4 = BYTE_AT(w, soff + 8u + j);
    sc = (s4 & 15u) | ((BYTE_AT(w, soff + j) >> 6) << 4);
    mn = (s4 >> 4) | ((BYTE_AT(w, soff + 4u + j) >> 6) << 4);
  }
  dw = f16_to_f32(U16_AT(w, soff));
  mw = -f16_to_f32(U16_AT(w, soff + 2u)) * float(mn);
  // Chunk j / 2 of 64 values: 32 bytes, low nibbles for even j, high for odd.
  const uint shift = 4u * (j & 1u);
  uint qw[8];
  load32(qs_off + 32u * (j >> 1), qw);
#if defined(WTYPE_Q5_K)
  uint qh[8];
  load32(soff + 16u, qh);
#endif
  for (uint l = 0; l < 32u; ++l) {
    uint v = (WD_BYTE(qw, l) >> shift) & 15u;
#if defined(WTYPE_Q5_K)
    v |= ((WD_BYTE(qh, l) >> j) & 1u) << 4;  // bit j of qh[l]
#endif
    q[l] = int(sc * v);
  }
#elif defined(WTYPE_Q6_K)
  // Super-block b / 8 (210 bytes: ql[128], qh[64], scales[16], d); sub-block j = b % 8 is
  // group g = j % 4 of half h = j / 2 (kquant.h, q6_k_value); int8 scale per 16 values.
  const uint soff = row_off + (b >> 3) * 210u, j = b & 7u, h = j >> 2, g = j & 3u;
  dw = f16_to_f32(U16_AT(w, soff + 208u));
  const int sc0 = int(BYTE_AT(w, soff + 192u + 2u * j) << 24) >> 24;
  const int sc1 = int(BYTE_AT(w, soff + 193u + 2u * j) << 24) >> 24;
  const uint ql_off = soff + 64u * h + 32u * (g & 1u), lshift = 4u * (g >> 1);
  const uint qh_off = soff + 128u + 32u * h;
  uint ql[8], qh[8];
  load32(ql_off, ql);
  load32(qh_off, qh);
  for (uint l = 0; l < 32u; ++l) {
    const uint v = ((WD_BYTE(ql, l) >> lshift) & 15u) | (((WD_BYTE(qh, l) >> (2u * g)) & 3u) << 4);
    q[l] = (l < 16u ? sc0 : sc1) * (int(v) - 32);
  }
#elif defined(WTYPE_IQ4_XS)
  // Super-block b / 8 (136 bytes: d, scales_h, scales_l[4], qs[128]); sub-block j = b % 8 has
  // the 6-bit scale ls - 32 and its 16 bytes of table indices at qs[16 j].
  const uint soff = row_off + (b >> 3) * 136u, j = b & 7u;
  dw = f16_to_f32(U16_AT(w, soff));
  const uint ls = ((BYTE_AT(w, soff + 4u + (j >> 1)) >> (4u * (j & 1u))) & 15u) | (((U16_AT(w, soff + 2u) >> (2u * j)) & 3u) << 4);
  const int sc = int(ls) - 32;
  uint wd[4];
  load16(soff + 8u + 16u * j, wd);
  for (uint l = 0; l < 16u; ++l) {
    const uint byte = WD_BYTE(wd, l);
    q[l] = sc * kIq4nl[byte & 15u];
    q[l + 16u] = sc * kIq4nl[byte >> 4];
  }
#else
#error "matmul.comp: unknown WTYPE"
#endif
  return Block(q, dw, mw, m0, m1);
}

// Adds sub-block b of a weight row (decoded: blk) . activation row act[r] into acc[r] for r < nr.
void dot_block(Block blk, uint b, uint act[TILE], uint nr, inout float acc[TILE]) {
  const uint nb = p.cols / 32u;
  for (uint r = 0; r < TILE; ++r) {
    if (r >= nr) break;
    const uint xb = (act[r] * nb + b) * 8u;
    int s = 0;
#if defined(HAS_MIN)
    int sx = 0;  // the sum of the activation quants (for the mw term)
#elif defined(MIN16)
    int sx = 0;  // the activation quants weighted by their 16-value group's integer min
#endif
    for (uint k = 0; k < 8u; ++k) {
      const int word = int(x[xb + k]);
      const int x0 = bitfieldExtract(word, 0, 8), x1 = bitfieldExtract(word, 8, 8);
      const int x2 = bitfieldExtract(word, 16, 8), x3 = bitfieldExtract(word, 24, 8);
      s += blk.q[4u * k] * x0 + blk.q[4u * k + 1u] * x1 + blk.q[4u * k + 2u] * x2 + blk.q[4u * k + 3u] * x3;
#if defined(HAS_MIN)
      sx += x0 + x1 + x2 + x3;
#elif defined(MIN16)
      sx += (k < 4u ? blk.m0 : blk.m1) * (x0 + x1 + x2 + x3);
#endif
    }
#if defined(Q8_1_ACTS)
    const uint xi = 2u * (act[r] * nb + b);
    acc[r] += float(s) * (blk.dw * xs[xi]) + blk.mw * xs[xi + 1u];
#elif defined(HAS_MIN) || defined(MIN16)
    const float dx = xs[act[r] * nb + b];
    acc[r] += float(s) * (blk.dw * dx) + float(sx) * (blk.mw * dx);
#else
    const float dx = xs[act[r] * nb + b];
    acc[r] += float(s) * (blk.dw * dx);
#endif
  }
}
#endif

// Adds W row (at byte row_off) . activation row act[r] into acc[r] for r < nr.
void dot_rows(uint row_off, uint act[TILE], uint nr, inout float acc[TILE]) {
  const uint tid = gl_LocalInvocationID.x % p.lanes;  // the invocation's place in its row
#if !defined(BLOCK_WEIGHTS)
  for (uint i = tid; i < p.cols; i += p.lanes) {
#if defined(WTYPE_F32)
    const float wv = uintBitsToFloat(w[(row_off >> 2) + i]);
#elif defined(WTYPE_BF16)
    const float wv = uintBitsToFloat(U16_AT(w, row_off + 2u * i) << 16);
#else
    const float wv = f16_to_f32(U16_AT(w, row_off + 2u * i));
#endif
    // Constant trip counts, so the compiler unrolls and keeps acc[] in registers (a loop to nr
    // indexes the array dynamically, which LLVM-based drivers spill to memory).
    for (uint r = 0; r < TILE; ++r) {
      if (r < nr) {
        float xv = uintBitsToFloat(x[act[r] * p.x_stride + i]);
#if defined(WTYPE_F16)
        xv = round_f16(xv);
#elif defined(WTYPE_BF16)
        xv = round_bf16(xv);
#endif
        acc[r] += wv * xv;
      }
    }
  }
#else
  const uint nb = p.cols / 32u;
  for (uint b = tid; b < nb; b += p.lanes) dot_block(decode_block(row_off, b), b, act, nr, acc);
#endif
}

// The tree over each row's partial sums; output row r of the tile goes to y row dst[r]. Only
// the tile's nr rows are summed (a decode step's one row, not eight; nr is uniform). Every
// invocation reaches the barriers, those of a row past the chunk's end too (they store nothing).
void reduce_store(float acc[TILE], uint dst[TILE], uint nr, uint o, bool valid) {
  const uint tid = gl_LocalInvocationID.x % p.lanes, base = (gl_LocalInvocationID.x / p.lanes) * p.lanes;
  for (uint r = 0; r < TILE; ++r)
    if (r < nr) partial[r][base + tid] = acc[r];
  barrier();
  for (uint s = p.lanes / 2u; s > 0u; s >>= 1) {
    if (tid < s)
      for (uint r = 0; r < TILE; ++r)
        if (r < nr) partial[r][base + tid] += partial[r][base + tid + s];
    barrier();
  }
  if (valid)  // a row's first nr invocations store its tile's rows (all of them when lanes < nr)
    for (uint r = tid; r < nr; r += p.lanes) y[dst[r] * p.y_stride + p.o0 + o] = partial[r][base];
  barrier();  // partial[] is reused by the next tile
}

// Output row o of the rows [first, first + count) of a workgroup's list (EXPERTS: the rows routed
// to its expert; dense: its group of activation rows), in tiles of 8. Quantised rows of up to
// `lanes` blocks (the 35B's: 2,048 and 512 columns): an invocation's one sub-block is read and
// decoded once and held in registers for every row, so the workgroup reads its weights once
// however many rows it covers. The sums are those of dot_rows (one block per invocation, added to
// zero), bit for bit; longer rows and float weights read the weights per tile.
void rows_times_weights(uint row_off, uint first, uint count, uint o, bool valid) {
  uint act[TILE], dst[TILE];
  float acc[TILE];
#if defined(BLOCK_WEIGHTS)
  const uint nb = p.cols / 32u, tid = gl_LocalInvocationID.x % p.lanes;
  const bool held = nb <= p.lanes;  // uniform
  Block blk;
  if (held && valid && tid < nb) blk = decode_block(row_off, tid);
#endif
  for (uint r0 = 0; r0 < count; r0 += TILE) {
    const uint nr = min(TILE, count - r0);
    for (uint r = 0; r < TILE; ++r) {
      const uint row = first + r0 + min(r, nr - 1u);
      dst[r] = row;
#if defined(EXPERTS)
      act[r] = p.gather != 0u ? uint(grp[2u * p.n_expert + row]) : row;
#else
      act[r] = row;
#endif
      acc[r] = 0.0;
    }
#if defined(BLOCK_WEIGHTS)
    if (held) {
      if (valid && tid < nb) dot_block(blk, tid, act, nr, acc);
    } else if (valid) {
      dot_rows(row_off, act, nr, acc);
    }
#else
    if (valid) dot_rows(row_off, act, nr, acc);
#endif
    reduce_store(acc, dst, nr, o, valid);
  }
}

void main() {
  const uint o = gl_WorkGroupID.x * (NINV / p.lanes) + gl_LocalInvocationID.x / p.lanes;  // this invocation's output row
  const bool valid = o < p.rows;
#if defined(EXPERTS)
  // The chunk's first active expert: the active list is ascending (a binary search, uniform in
  // the workgroup, so the early returns below leave every invocation together).
  const uint n_active = uint(grp[p.active_off]);
  uint lo = 0u, hi = n_active;
  while (lo < hi) {
    const uint mid = (lo + hi) >> 1;
    if (uint(grp[p.active_off + 1u + mid]) < p.e0) lo = mid + 1u; else hi = mid;
  }
  const uint idx = lo + gl_WorkGroupID.y;
  if (idx >= n_active) return;
  const uint e = uint(grp[p.active_off + 1u + idx]);
  if (e >= p.e0 + p.n_chunk) return;
  const int count = grp[e], first = grp[p.n_expert + e];
  rows_times_weights(p.w_base + (e - p.e0) * p.expert_stride + o * p.w_stride, uint(first), uint(count), o, valid);
#else
  const uint a0 = gl_WorkGroupID.y * ACT_ROWS_PER_GROUP;
  rows_times_weights(p.w_base + o * p.w_stride, a0, min(ACT_ROWS_PER_GROUP, p.n_act - a0), o, valid);
#endif
}
