// Q2_K and Q3_K: dequantisation (ggml's float operations) and this project's own quantisers.
//
// Both types have 16 sub-blocks of 16 values. The quantisers:
//  1. fit each sub-block alone: Q2_K affinely (x ~ s q - m, q in 0..3, m >= 0), Q3_K
//     symmetrically (x ~ s q, q in -4..3, the sign of s chosen so that the value of largest
//     magnitude can use -4); a handful of candidate steps, each rounded and refitted by least
//     squares, the one of least squared error kept;
//  2. store the sub-block scales (and mins) as small integers under one fp16 scale, trying the
//     neighbours of each rounded integer and keeping the pair that reconstructs its 16 values best;
//  3. refit the fp16 super-block scale(s) by least squares over the 256 values with the integers
//     fixed, and keep the refit when it lowers the error of the bytes actually written.
// Errors are always measured on the dequantised values, so what is minimised is what is stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/convert.h"
#include "kernels/kquant.h"

namespace clover::kernels {

namespace {

int round_int(float v) { return static_cast<int>(std::nearbyint(v)); }

// ---- Q2_K ------------------------------------------------------------------------------------

struct Affine {
  float s = 0, m = 0;  // x ~ s * q - m
};

// Best affine fit of 16 values with q in 0..3 and m >= 0.
Affine fit_affine_2bit(const float* x) {
  constexpr int n = 16, nmax = 3;
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  lo = std::min(lo, 0.0f);
  if (hi <= lo) return {0.0f, -lo};
  Affine best{(hi - lo) / nmax, -lo};
  double best_err = 0;
  for (int i = 0; i < n; ++i) {
    const double q = std::clamp(round_int((x[i] - lo) / best.s), 0, nmax);
    best_err += (best.s * q - best.m - x[i]) * (best.s * q - best.m - x[i]);
  }
  for (int step = -6; step <= 12; ++step) {
    const float iscale = (nmax + 0.1f * step) / (hi - lo);
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    int q[n];
    for (int i = 0; i < n; ++i) {
      q[i] = std::clamp(round_int((x[i] - lo) * iscale), 0, nmax);
      sq += q[i], sqq += double(q[i]) * q[i], sx += x[i], sqx += double(q[i]) * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) continue;
    double s = (n * sqx - sq * sx) / det, b = (sx - s * sq) / n;
    if (b > 0) b = 0, s = sqq > 0 ? sqx / sqq : 0;  // the min is stored as m = -b >= 0
    if (s <= 0) continue;
    // Round again against the refitted line: the least-squares line moves the thresholds.
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const int qi = std::clamp(static_cast<int>(std::nearbyint((x[i] - b) / s)), 0, nmax);
      const double e = s * qi + b - x[i];
      err += e * e;
    }
    if (err < best_err) best_err = err, best = {static_cast<float>(s), static_cast<float>(-b)};
  }
  return best;
}

// The 16 values of a sub-block against stored step d1 and offset m1 (as dequantised: d1 * q -
// m1): their q and the squared error.
double q2_round(const float* x, float d1, float m1, uint8_t* q) {
  double err = 0;
  for (int i = 0; i < 16; ++i) {
    const int qi = d1 > 0 ? std::clamp(round_int((x[i] + m1) / d1), 0, 3) : 0;
    q[i] = static_cast<uint8_t>(qi);
    const float y = d1 * static_cast<float>(qi) - m1;
    err += double(y - x[i]) * (y - x[i]);
  }
  return err;
}

// Integer scales and mins (0..15) of the 16 sub-blocks under d and dmin, each the best of the
// neighbours of its rounded fit; returns the total squared error.
double q2_pick_scales(const float* x, const Affine* f, float d, float dmin, uint8_t* sc, uint8_t* mn, uint8_t* q) {
  double total = 0;
  for (int j = 0; j < 16; ++j) {
    const int s0 = d > 0 ? round_int(f[j].s / d) : 0, m0 = dmin > 0 ? round_int(f[j].m / dmin) : 0;
    double best = INFINITY;
    for (int ds = -1; ds <= 1; ++ds)
      for (int dm = -1; dm <= 1; ++dm) {
        const int s = std::clamp(s0 + ds, 0, 15), m = std::clamp(m0 + dm, 0, 15);
        uint8_t qq[16];
        const double err = q2_round(x + 16 * j, d * static_cast<float>(s), dmin * static_cast<float>(m), qq);
        if (err < best) {
          best = err, sc[j] = static_cast<uint8_t>(s), mn[j] = static_cast<uint8_t>(m);
          std::memcpy(q + 16 * j, qq, 16);
        }
      }
    total += best;
  }
  return total;
}

void quantize_q2_k_block(const float* x, BlockQ2_K& y) {
  Affine f[16];
  float max_s = 0, max_m = 0;
  for (int j = 0; j < 16; ++j) {
    f[j] = fit_affine_2bit(x + 16 * j);
    max_s = std::max(max_s, f[j].s), max_m = std::max(max_m, f[j].m);
  }
  uint16_t dh = fp32_to_fp16(max_s / 15.0f), mh = fp32_to_fp16(max_m / 15.0f);
  uint8_t sc[16], mn[16], q[256];
  double err = q2_pick_scales(x, f, fp16_to_fp32(dh), fp16_to_fp32(mh), sc, mn, q);
  // Refit d and dmin over the super-block with the integers fixed: x ~ d A - dmin B.
  for (int iter = 0; iter < 2; ++iter) {
    double aa = 0, ab = 0, bb = 0, ax = 0, bx = 0;
    for (int k = 0; k < 256; ++k) {
      const double a = double(sc[k / 16]) * q[k], b = mn[k / 16];
      aa += a * a, ab += a * b, bb += b * b, ax += a * x[k], bx += b * x[k];
    }
    const double det = aa * bb - ab * ab;
    if (det <= 0) break;
    const double d = (ax * bb - bx * ab) / det, dmin = -(aa * bx - ab * ax) / det;
    if (d <= 0 || dmin < 0) break;
    const uint16_t dh2 = fp32_to_fp16(static_cast<float>(d)), mh2 = fp32_to_fp16(static_cast<float>(dmin));
    uint8_t sc2[16], mn2[16], q2[256];
    const double err2 = q2_pick_scales(x, f, fp16_to_fp32(dh2), fp16_to_fp32(mh2), sc2, mn2, q2);
    if (err2 >= err) break;
    err = err2, dh = dh2, mh = mh2;
    std::memcpy(sc, sc2, 16), std::memcpy(mn, mn2, 16), std::memcpy(q, q2, 256);
  }
  y.d = dh, y.dmin = mh;
  for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(sc[j] | (mn[j] << 4));
  std::memset(y.qs, 0, sizeof(y.qs));
  for (int k = 0; k < 256; ++k) y.qs[32 * (k / 128) + k % 32] |= static_cast<uint8_t>(q[k] << (2 * ((k % 128) / 32)));
}

// ---- Q3_K ------------------------------------------------------------------------------------

// Best scale of 16 values for q in -4..3 (x ~ s q).
float fit_symmetric_3bit(const float* x) {
  constexpr int n = 16;
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  if (amax == 0) return 0;
  float best = vmax / -4.0f;
  double best_err = INFINITY;
  for (int step = -8; step <= 8; ++step) {
    const float iscale = -(4.0f + 0.1f * step) / vmax;
    double sqq = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(round_int(x[i] * iscale), -4, 3);
      sqq += double(q) * q, sqx += double(q) * x[i];
    }
    if (sqq == 0) continue;
    const double s = sqx / sqq;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(static_cast<int>(std::nearbyint(x[i] / s)), -4, 3);
      const double e = s * q - x[i];
      err += e * e;
    }
    if (err < best_err) best_err = err, best = static_cast<float>(s);
  }
  return best;
}

double q3_round(const float* x, float step, int8_t* q) {
  double err = 0;
  for (int i = 0; i < 16; ++i) {
    const int qi = step != 0 ? std::clamp(round_int(x[i] / step), -4, 3) : 0;
    q[i] = static_cast<int8_t>(qi);
    const float y = step * static_cast<float>(qi);
    err += double(y - x[i]) * (y - x[i]);
  }
  return err;
}

// Integer scales (-32..31) of the 16 sub-blocks under d; returns the total squared error.
double q3_pick_scales(const float* x, const float* s, float d, int8_t* sc, int8_t* q) {
  double total = 0;
  for (int j = 0; j < 16; ++j) {
    const int s0 = d != 0 ? round_int(s[j] / d) : 0;
    double best = INFINITY;
    for (int ds = -1; ds <= 1; ++ds) {
      const int v = std::clamp(s0 + ds, -32, 31);
      int8_t qq[16];
      const double err = q3_round(x + 16 * j, d * static_cast<float>(v), qq);
      if (err < best) best = err, sc[j] = static_cast<int8_t>(v), std::memcpy(q + 16 * j, qq, 16);
    }
    total += best;
  }
  return total;
}

void quantize_q3_k_block(const float* x, BlockQ3_K& y) {
  float s[16], amax = 0, vmax = 0;
  for (int j = 0; j < 16; ++j) {
    s[j] = fit_symmetric_3bit(x + 16 * j);
    if (std::fabs(s[j]) > amax) amax = std::fabs(s[j]), vmax = s[j];
  }
  // The largest sub-block scale maps to -32 (the 6-bit scales reach one further below zero).
  uint16_t dh = fp32_to_fp16(amax > 0 ? vmax / -32.0f : 0.0f);  // (+0 for a block of zeros, as ggml writes)
  int8_t sc[16], q[256];
  double err = q3_pick_scales(x, s, fp16_to_fp32(dh), sc, q);
  for (int iter = 0; iter < 2; ++iter) {
    double aa = 0, ax = 0;
    for (int k = 0; k < 256; ++k) {
      const double a = double(sc[k / 16]) * q[k];
      aa += a * a, ax += a * x[k];
    }
    if (aa <= 0) break;
    const uint16_t dh2 = fp32_to_fp16(static_cast<float>(ax / aa));
    int8_t sc2[16], q2[256];
    const double err2 = q3_pick_scales(x, s, fp16_to_fp32(dh2), sc2, q2);
    if (err2 >= err) break;
    err = err2, dh = dh2;
    std::memcpy(sc, sc2, 16), std::memcpy(q, q2, 256);
  }
  y.d = dh;
  std::memset(y.scales, 0, sizeof(y.scales));
  for (int j = 0; j < 16; ++j) {
    const int v = sc[j] + 32;
    y.scales[j % 8] |= static_cast<uint8_t>((v & 0x0f) << (4 * (j / 8)));
    y.scales[8 + j % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (j / 4)));
  }
  std::memset(y.qs, 0, sizeof(y.qs));
  std::memset(y.hmask, 0, sizeof(y.hmask));
  for (int k = 0; k < 256; ++k) {
    const int v = q[k] + 4;  // 0..7: bit 2 is the high bit (set: no -4)
    y.qs[32 * (k / 128) + k % 32] |= static_cast<uint8_t>((v & 3) << (2 * ((k % 128) / 32)));
    y.hmask[k % 32] |= static_cast<uint8_t>((v >> 2) << (k / 32));
  }
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) quantize_q2_k_block(x + b * kQK_K, y[b]);
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) quantize_q3_k_block(x + b * kQK_K, y[b]);
}

// ggml's dequantisers: y = (d * scale) * q - (dmin * min) for Q2_K, y = (d * (scale - 32)) * q
// for Q3_K, the products in this order, nothing fused.
void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int k = 0; k < 256; ++k) {
      const uint8_t sc = x[b].scales[k / 16];
      const float dl = d * static_cast<float>(sc & 0x0f), ml = dmin * static_cast<float>(sc >> 4);
      y[k] = dl * static_cast<float>(q2_k_value(x[b], k)) - ml;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    for (int k = 0; k < 256; ++k) {
      const float dl = d * static_cast<float>(q3_k_scale(x[b], k / 16));
      y[k] = dl * static_cast<float>(q3_k_value(x[b], k));
    }
  }
}

}  // namespace clover::kernels
