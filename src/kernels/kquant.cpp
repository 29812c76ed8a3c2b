// K-quant conversions: dequantisation (ggml's float operations), the Q8_K activation quantiser,
// and this project's own file quantisers.
//
// The quantisers fit each sub-block by a small search: for affine types (Q4_K, Q5_K: x ~ s q - m,
// q in 0..nmax, m >= 0) a few candidate steps around (max - min) / nmax, each rounded and then
// refitted by least squares; for Q6_K (x ~ s (q - 32)) candidate steps around max / 32, each
// refitted. The super-block then stores the sub-block scales (and mins) in 6 or 8 bits under one
// fp16 scale, and the values are rounded once more against the scales as stored, so that the
// reconstruction error is the one of the bytes actually written.
#include "kernels/kquant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/convert.h"

namespace clover::kernels {

void k4_pack_scales(const uint8_t* sc, const uint8_t* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

namespace {

int round_int(float v) { return static_cast<int>(std::nearbyint(v)); }

struct Affine {
  float s = 0, m = 0;  // x ~ s * q - m
};

// Best affine fit of n values with q in 0..nmax (x ~ s q - m, m >= 0).
Affine fit_affine(const float* x, int n, int nmax) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  lo = std::min(lo, 0.0f);
  if (hi <= lo) return {0.0f, -lo};
  Affine best{(hi - lo) / nmax, -lo};
  double best_err = INFINITY;
  for (int step = -6; step <= 6; ++step) {
    const float iscale = (nmax + 0.1f * step) / (hi - lo);
    // Round with this step, then refit s and b of x ~ s q + b by least squares.
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    int q[64];
    for (int i = 0; i < n; ++i) {
      q[i] = std::clamp(round_int((x[i] - lo) * iscale), 0, nmax);
      sq += q[i], sqq += double(q[i]) * q[i], sx += x[i], sqx += double(q[i]) * x[i];
    }
    const double det = n * sqq - sq * sq;
    double s, b;
    if (det > 0) {
      s = (n * sqx - sq * sx) / det;
      b = (sx - s * sq) / n;
    } else {
      s = 1.0 / iscale, b = lo;
    }
    if (b > 0) b = 0, s = sqq > 0 ? sqx / sqq : 0;  // mins are stored as m = -b >= 0
    if (s < 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = s * q[i] + b - x[i];
      err += e * e;
    }
    if (err < best_err) best_err = err, best = {static_cast<float>(s), static_cast<float>(-b)};
  }
  return best;
}

// Best scale of 16 values for q in -32..31 (x ~ s q); the sign of s follows the value of
// largest magnitude, so that it can use -32.
float fit_symmetric(const float* x, int n) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  if (amax == 0) return 0;
  float best = vmax / -32.0f;
  double best_err = INFINITY;
  for (int step = -8; step <= 8; ++step) {
    const float iscale = -(32.0f + 0.25f * step) / vmax;
    double sqq = 0, sqx = 0;
    int q[16];
    for (int i = 0; i < n; ++i) {
      q[i] = std::clamp(round_int(x[i] * iscale), -32, 31);
      sqq += double(q[i]) * q[i], sqx += double(q[i]) * x[i];
    }
    if (sqq == 0) continue;
    const double s = sqx / sqq;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = s * q[i] - x[i];
      err += e * e;
    }
    if (err < best_err) best_err = err, best = static_cast<float>(s);
  }
  return best;
}

// Q4_K / Q5_K: the shared scale layout; q receives the 256 unsigned values.
void quantize_k_affine(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales, uint8_t* q) {
  Affine f[8];
  float max_s = 0, max_m = 0;
  for (int j = 0; j < 8; ++j) {
    f[j] = fit_affine(x + 32 * j, 32, nmax);
    max_s = std::max(max_s, f[j].s), max_m = std::max(max_m, f[j].m);
  }
  const uint16_t dh = fp32_to_fp16(max_s / 63.0f), mh = fp32_to_fp16(max_m / 63.0f);
  const float d = fp16_to_fp32(dh), dmin = fp16_to_fp32(mh);
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(d > 0 ? std::clamp(round_int(f[j].s / d), 0, 63) : 0);
    mn[j] = static_cast<uint8_t>(dmin > 0 ? std::clamp(round_int(f[j].m / dmin), 0, 63) : 0);
  }
  *d_out = dh, *dmin_out = mh;
  k4_pack_scales(sc, mn, scales);
  for (int j = 0; j < 8; ++j) {
    const float s = d * sc[j], m = dmin * mn[j];
    for (int i = 0; i < 32; ++i)
      q[32 * j + i] = static_cast<uint8_t>(s > 0 ? std::clamp(round_int((x[32 * j + i] + m) / s), 0, nmax) : 0);
  }
}

}  // namespace

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    uint8_t q[256];
    quantize_k_affine(x, 15, &y[b].d, &y[b].dmin, y[b].scales, q);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) y[b].qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    uint8_t q[256];
    quantize_k_affine(x, 31, &y[b].d, &y[b].dmin, y[b].scales, q);
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        y[b].qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 15) | ((q[64 * c + 32 + l] & 15) << 4));
    for (int k = 0; k < 256; ++k) y[b].qh[k % 32] |= static_cast<uint8_t>((q[k] >> 4) << (k / 32));
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float s[16], amax = 0, vmax = 0;
    for (int j = 0; j < 16; ++j) {
      s[j] = fit_symmetric(x + 16 * j, 16);
      if (std::fabs(s[j]) > amax) amax = std::fabs(s[j]), vmax = s[j];
    }
    // The largest sub-block scale maps to -128 (int8 scales reach one further below zero).
    const uint16_t dh = fp32_to_fp16(vmax / -128.0f);
    const float d = fp16_to_fp32(dh);
    y[b].d = dh;
    uint8_t q[256];
    for (int j = 0; j < 16; ++j) {
      const int sc = d != 0 ? std::clamp(round_int(s[j] / d), -128, 127) : 0;
      y[b].scales[j] = static_cast<int8_t>(sc);
      const float step = d * sc;
      for (int i = 0; i < 16; ++i)
        q[16 * j + i] = static_cast<uint8_t>(step != 0 ? std::clamp(round_int(x[16 * j + i] / step), -32, 31) + 32 : 32);
    }
    std::memset(y[b].ql, 0, sizeof(y[b].ql));
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int k = 0; k < 256; ++k) {
      const int h = k / 128, g = (k % 128) / 32, l = k % 32;
      y[b].ql[64 * h + l + 32 * (g & 1)] |= static_cast<uint8_t>((q[k] & 15) << (g < 2 ? 0 : 4));
      y[b].qh[32 * h + l] |= static_cast<uint8_t>((q[k] >> 4) << (2 * g));
    }
  }
}

// ggml's dequantisers: y = (d * scale) * q - (dmin * min) for Q4_K / Q5_K, y = (d * scale) * q
// for Q6_K (the float products in this order, nothing fused).
namespace {
// Q4_K and Q5_K share the layout of scales and mins; only the quant's bits differ.
template <class Block, int (*value)(const Block&, int)>
void dequantize_k_scale_min(const Block* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      k4_scale_min(x[b].scales, j, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      for (int i = 32 * j; i < 32 * j + 32; ++i) y[i] = d1 * static_cast<float>(value(x[b], i)) - m1;
    }
  }
}
}  // namespace

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t n) { dequantize_k_scale_min<BlockQ4_K, q4_k_value>(x, y, n); }
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t n) { dequantize_k_scale_min<BlockQ5_K, q5_k_value>(x, y, n); }

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    for (int k = 0; k < 256; ++k)
      y[k] = d * static_cast<float>(x[b].scales[k / 16]) * static_cast<float>(q6_k_value(x[b], k) - 32);
  }
}

void quantize_row_q8_k_activation(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float amax = 0, vmax = 0;
    for (int j = 0; j < kQK_K; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), vmax = x[j];
    std::memset(&y[b], 0, sizeof(BlockQ8_K));
    if (amax == 0) continue;
    const float iscale = -127.0f / vmax;
    for (int j = 0; j < kQK_K; ++j) y[b].qs[j] = static_cast<int8_t>(std::min(127, round_int(iscale * x[j])));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[b].qs[16 * g + j];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace clover::kernels
