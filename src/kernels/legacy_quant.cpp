// Q4_1, Q5_0, Q5_1, IQ4_NL and Q8_1: dequantisation, the file quantisers and the Q8_1 activations.
//
// The quantisers fit each block of 32 by a small search: 13 candidate steps around the range
// over the number of levels (Q4_1 / Q5_1: x ~ d q + m with q in 0..nmax; Q5_0: x ~ d (q - 16)
// with the sign of d chosen so the value of largest magnitude can use -16), each rounded and
// refitted by least squares; the fit is then stored in fp16 and the values are rounded once more
// against the stored scales, and the candidate with the least error of the bytes actually written
// is kept.
#include "kernels/legacy_quant.h"

#include <algorithm>
#include <cmath>

#include "kernels/convert.h"

namespace clover::kernels {

namespace {

int round_int(float v) { return static_cast<int>(std::nearbyint(v)); }

// The stored affine fit of one block: fp16 d and m and the 32 unsigned values.
struct AffineBlock {
  uint16_t d = 0, m = 0;
  uint8_t q[kQK] = {};
};

// q = round((x - m) / d) against the fp16 values as stored, and the squared error of the result.
double round_affine(const float* x, int nmax, AffineBlock* b) {
  const float d = fp16_to_fp32(b->d), m = fp16_to_fp32(b->m);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  double err = 0;
  for (int i = 0; i < kQK; ++i) {
    const int q = std::clamp(round_int((x[i] - m) * id), 0, nmax);
    b->q[i] = static_cast<uint8_t>(q);
    const double e = double(d) * q + m - x[i];
    err += e * e;
  }
  return err;
}

AffineBlock fit_affine_block(const float* x, int nmax) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < kQK; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  AffineBlock best;
  best.d = fp32_to_fp16((hi - lo) / nmax);
  best.m = fp32_to_fp16(lo);
  double best_err = round_affine(x, nmax, &best);
  if (hi <= lo) return best;
  for (int step = -6; step <= 6; ++step) {
    const float iscale = (nmax + 0.1f * step) / (hi - lo);
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < kQK; ++i) {
      const int q = std::clamp(round_int((x[i] - lo) * iscale), 0, nmax);
      sq += q, sqq += double(q) * q, sx += x[i], sqx += double(q) * x[i];
    }
    const double det = kQK * sqq - sq * sq;
    if (det <= 0) continue;
    const double s = (kQK * sqx - sq * sx) / det, m = (sx - s * sq) / kQK;
    if (s <= 0) continue;
    AffineBlock cand;
    cand.d = fp32_to_fp16(static_cast<float>(s));
    cand.m = fp32_to_fp16(static_cast<float>(m));
    const double err = round_affine(x, nmax, &cand);
    if (err < best_err) best_err = err, best = cand;
  }
  return best;
}

// q - 16 = round(x / d) in -16..15 against the stored fp16 d; returns the squared error.
double round_symmetric(const float* x, uint16_t dh, uint8_t* q) {
  const float d = fp16_to_fp32(dh);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  double err = 0;
  for (int i = 0; i < kQK; ++i) {
    const int v = std::clamp(round_int(x[i] * id), -16, 15);
    q[i] = static_cast<uint8_t>(v + 16);
    const double e = double(d) * v - x[i];
    err += e * e;
  }
  return err;
}

uint16_t fit_symmetric_block(const float* x, uint8_t* q) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < kQK; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  uint16_t best = fp32_to_fp16(vmax / -16.0f);
  double best_err = round_symmetric(x, best, q);
  if (amax == 0) return best;
  uint8_t tmp[kQK];
  for (int step = -6; step <= 6; ++step) {
    const float iscale = -(16.0f + 0.25f * step) / vmax;
    double sqq = 0, sqx = 0;
    for (int i = 0; i < kQK; ++i) {
      const int v = std::clamp(round_int(x[i] * iscale), -16, 15);
      sqq += double(v) * v, sqx += double(v) * x[i];
    }
    if (sqq <= 0) continue;
    const uint16_t dh = fp32_to_fp16(static_cast<float>(sqx / sqq));
    const double err = round_symmetric(x, dh, tmp);
    if (err < best_err) best_err = err, best = dh, std::memcpy(q, tmp, kQK);
  }
  return best;
}

// The index of the level nearest to v (the first of two at equal distance).
int nearest_iq4nl(float v) {
  int best = 0;
  float bd = std::fabs(v - kIq4nlValues[0]);
  for (int i = 1; i < 16; ++i) {
    const float dd = std::fabs(v - kIq4nlValues[i]);
    if (dd < bd) bd = dd, best = i;
  }
  return best;
}

double round_iq4_nl(const float* x, uint16_t dh, uint8_t* q) {
  const float d = fp16_to_fp32(dh);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  double err = 0;
  for (int i = 0; i < kQK; ++i) {
    q[i] = static_cast<uint8_t>(nearest_iq4nl(x[i] * id));
    const double e = double(d) * kIq4nlValues[q[i]] - x[i];
    err += e * e;
  }
  return err;
}

uint16_t fit_iq4_nl_block(const float* x, uint8_t* q) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < kQK; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  uint16_t best = fp32_to_fp16(vmax / -127.0f);
  double best_err = round_iq4_nl(x, best, q);
  if (amax == 0) return best;
  uint8_t tmp[kQK];
  // Both signs: the largest value on the -127 side, or on the +113 side.
  for (const float end : {-127.0f, 113.0f})
    for (int step = -8; step <= 8; ++step) {
      const float iscale = (end + (end < 0 ? -1.0f : 1.0f) * 1.5f * step) / vmax;
      double svv = 0, svx = 0;
      for (int i = 0; i < kQK; ++i) {
        const int v = kIq4nlValues[nearest_iq4nl(x[i] * iscale)];
        svv += double(v) * v, svx += double(v) * x[i];
      }
      if (svv <= 0) continue;
      const uint16_t dh = fp32_to_fp16(static_cast<float>(svx / svv));
      const double err = round_iq4_nl(x, dh, tmp);
      if (err < best_err) best_err = err, best = dh, std::memcpy(q, tmp, kQK);
    }
  return best;
}

// The float scale of 32 values for x ~ s * table[q] (IQ4_XS's sub-blocks; 0 for all zeros).
float fit_iq4_scale(const float* x) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < kQK; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  if (amax == 0) return 0;
  auto error = [&](float d) {
    const float id = 1.0f / d;
    double err = 0;
    for (int i = 0; i < kQK; ++i) {
      const double e = double(d) * kIq4nlValues[nearest_iq4nl(x[i] * id)] - x[i];
      err += e * e;
    }
    return err;
  };
  float best = vmax / -127.0f;
  double best_err = error(best);
  for (const float end : {-127.0f, 113.0f})
    for (int step = -8; step <= 8; ++step) {
      const float iscale = (end + (end < 0 ? -1.0f : 1.0f) * 1.5f * step) / vmax;
      double svv = 0, svx = 0;
      for (int i = 0; i < kQK; ++i) {
        const int v = kIq4nlValues[nearest_iq4nl(x[i] * iscale)];
        svv += double(v) * v, svx += double(v) * x[i];
      }
      if (svv <= 0 || svx == 0) continue;
      const float d = static_cast<float>(svx / svv);
      const double err = error(d);
      if (err < best_err) best_err = err, best = d;
    }
  return best;
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}
void pack_high_bits(const uint8_t* q, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < kQK; ++j) h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(h >> (8 * i));
}

}  // namespace

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    const AffineBlock f = fit_affine_block(x, 15);
    y[b].d = f.d, y[b].m = f.m;
    pack_nibbles(f.q, y[b].qs);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    const AffineBlock f = fit_affine_block(x, 31);
    y[b].d = f.d, y[b].m = f.m;
    pack_nibbles(f.q, y[b].qs);
    pack_high_bits(f.q, y[b].qh);
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    uint8_t q[kQK];
    y[b].d = fit_symmetric_block(x, q);
    pack_nibbles(q, y[b].qs);
    pack_high_bits(q, y[b].qh);
  }
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    uint8_t q[kQK];
    y[b].d = fit_iq4_nl_block(x, q);
    pack_nibbles(q, y[b].qs);
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    for (int k = 0; k < kQK; ++k) y[k] = d * static_cast<float>(iq4_nl_value(x[b], k));
  }
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float s[8], smax = 0;
    for (int j = 0; j < 8; ++j) {
      s[j] = fit_iq4_scale(x + 32 * j);
      if (std::fabs(s[j]) > std::fabs(smax)) smax = s[j];
    }
    BlockIQ4_XS& o = y[b];
    std::memset(&o, 0, sizeof(o));
    o.d = fp32_to_fp16(smax / -32.0f);  // the largest scale maps to -32
    const float d = fp16_to_fp32(o.d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 8; ++j) {
      const int ls = std::clamp(round_int(s[j] * id), -32, 31) + 32;
      o.scales_l[j / 2] = static_cast<uint8_t>(o.scales_l[j / 2] | ((ls & 0x0f) << (4 * (j % 2))));
      o.scales_h = static_cast<uint16_t>(o.scales_h | ((ls >> 4) << (2 * j)));
      const float dl = d * static_cast<float>(ls - 32);
      const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
      uint8_t q[kQK];
      for (int i = 0; i < kQK; ++i) q[i] = static_cast<uint8_t>(nearest_iq4nl(x[32 * j + i] * idl));
      pack_nibbles(q, o.qs + 16 * j);
    }
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[b], j));
      for (int k = 0; k < kQK; ++k) y[32 * j + k] = dl * static_cast<float>(iq4_xs_value(x[b], 32 * j + k));
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
    for (int k = 0; k < kQK; ++k) y[k] = static_cast<float>(q4_1_value(x[b], k)) * d + m;
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    for (int k = 0; k < kQK; ++k) y[k] = static_cast<float>(q5_0_value(x[b], k) - 16) * d;
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
    for (int k = 0; k < kQK; ++k) y[k] = static_cast<float>(q5_1_value(x[b], k)) * d + m;
  }
}

void quantize_row_q8_1_activation(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    BlockQ8_0 q8;
    quantize_row_q8_0_activation(x, &q8, kQK);
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    int32_t sum = 0;
    for (int j = 0; j < kQK; ++j) sum += q8.qs[j];
    y[b].d = q8.d;
    y[b].s = fp32_to_fp16(amax / 127.0f * static_cast<float>(sum));
    std::memcpy(y[b].qs, q8.qs, kQK);
  }
}

}  // namespace clover::kernels
