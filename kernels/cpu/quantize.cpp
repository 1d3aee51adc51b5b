#include "kernels/cpu/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/quant_blocks.hpp"

// The reference rounding of the _0/_1 types needs each product and sum rounded on its own
// (x * id, then + 16.5): this file is compiled with -ffp-contract=off (kernels/CMakeLists.txt)
// so that GCC fuses none of them into an FMA, which would move values that sit on a
// rounding edge.

namespace orzo::cpu {
namespace {

// v rounded to the nearest integer (ties to even) and clamped to [lo, hi]; NaN gives lo,
// and values far outside the range never reach the integer conversion.
int nearest_in(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (!(v < static_cast<float>(hi))) return hi;
  return static_cast<int>(std::nearbyint(v));
}

// The signed value of largest magnitude (the first of equal ones): the reference scales map
// it onto the wider, negative end of an asymmetric code range.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

// ---- The _0 and _1 types: one f16 scale (and min) per 32 weights, gguf.quants' rounding.

// The 4-bit codes of a 32-weight block into its 16 bytes: byte j holds j low, j + 16 high.
void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
}

// Bit 4 of each of 32 codes, as the little-endian 32-bit qh of a Q5 block.
void pack_fifth_bits(const int* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, sizeof bits);
}

// d = amax / 127 and q = round-half-away(x / d), the division by the unrounded f32 d even
// though the stored scale is f16.
void q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b + offsetof(BlockQ8_0, d), f32_to_f16(d));
  auto* qs = reinterpret_cast<int8_t*>(b + offsetof(BlockQ8_0, qs));
  for (int j = 0; j < 32; ++j) qs[j] = static_cast<int8_t>(std::round(x[j] * id));
}

// The symmetric types map the signed extreme to the lowest code (-8 or -16), so the full
// range is used on the side that needs it; q = trunc(x / d + offset + 0.5), clamped.
template <int kOffset>
void symmetric_codes(const float* x, float& d, int* q) {
  d = signed_absmax(x, 32) / static_cast<float>(-kOffset);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  // The operands stay in [0, 2 * kOffset + 0.5], so truncation is the reference's floor.
  for (int j = 0; j < 32; ++j)
    q[j] = std::min(2 * kOffset - 1, static_cast<int>(x[j] * id + (static_cast<float>(kOffset) + 0.5f)));
}

// The affine types span [min, max] in 2^bits - 1 steps: q = trunc((x - min) / d + 0.5).
template <int kLevels>
void affine_codes(const float* x, float& d, float& min, int* q) {
  min = x[0];
  float max = x[0];
  for (int j = 1; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  d = (max - min) / static_cast<float>(kLevels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = std::min(kLevels - 1, static_cast<int>((x[j] - min) * id + 0.5f));
}

void q4_0(const float* x, uint8_t* b) {
  float d;
  int q[32];
  symmetric_codes<8>(x, d, q);
  store_u16(b + offsetof(BlockQ4_0, d), f32_to_f16(d));
  pack_nibbles(q, b + offsetof(BlockQ4_0, qs));
}

void q5_0(const float* x, uint8_t* b) {
  float d;
  int q[32];
  symmetric_codes<16>(x, d, q);
  store_u16(b + offsetof(BlockQ5_0, d), f32_to_f16(d));
  pack_fifth_bits(q, b + offsetof(BlockQ5_0, qh));
  pack_nibbles(q, b + offsetof(BlockQ5_0, qs));
}

void q4_1(const float* x, uint8_t* b) {
  float d, min;
  int q[32];
  affine_codes<16>(x, d, min, q);
  store_u16(b + offsetof(BlockQ4_1, d), f32_to_f16(d));
  store_u16(b + offsetof(BlockQ4_1, m), f32_to_f16(min));
  pack_nibbles(q, b + offsetof(BlockQ4_1, qs));
}

void q5_1(const float* x, uint8_t* b) {
  float d, min;
  int q[32];
  affine_codes<32>(x, d, min, q);
  store_u16(b + offsetof(BlockQ5_1, d), f32_to_f16(d));
  store_u16(b + offsetof(BlockQ5_1, m), f32_to_f16(min));
  pack_fifth_bits(q, b + offsetof(BlockQ5_1, qh));
  pack_nibbles(q, b + offsetof(BlockQ5_1, qs));
}

// ---- Scale searches shared by the K-quants and IQ4. Sums are in double: weights of x^2
// at |x| = 6e4 would overflow f32 sums of squares of them, and those at 1e-30 underflow.

// Codes L in [-nmax, nmax - 1] and the scale s minimizing sum w (x - s L)^2 for them.
// Candidate grids put the signed extreme at -(nmax + 0.1 k), k = -9..9, each refit by least
// squares (ggml's make_qx_quants search); then single-code moves of +-1 that lower the
// weighted error are taken until none does (at most a few passes), which also finds what
// the reference's per-weight re-rounding (make_q3_quants) finds.
float fit_symmetric(const float* x, const float* w, int n, int nmax, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (max == 0.0f) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  int8_t trial[32];
  double best_xl = 0.0, best_ll = 0.0;  // the fit is best where xl^2 / ll is largest
  for (int k = -9; k <= 9; ++k) {
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    double xl = 0.0, ll = 0.0;
    for (int i = 0; i < n; ++i) {
      const int l = nearest_in(iscale * x[i], -nmax, nmax - 1);
      trial[i] = static_cast<int8_t>(l);
      xl += static_cast<double>(w[i]) * x[i] * l;
      ll += static_cast<double>(w[i]) * l * l;
    }
    if (ll > 0.0 && (best_ll == 0.0 || xl * xl * best_ll > best_xl * best_xl * ll)) {
      std::copy(trial, trial + n, L);
      best_xl = xl;
      best_ll = ll;
    }
  }
  if (best_ll == 0.0) {  // every weight is zero: nothing to fit
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  for (int pass = 0; pass < 4; ++pass) {
    bool moved = false;
    for (int i = 0; i < n; ++i) {
      for (int step : {-1, 1}) {
        const int l = L[i] + step;
        if (l < -nmax || l > nmax - 1) continue;
        const double wx = static_cast<double>(w[i]) * x[i];
        const double xl = best_xl + wx * step;
        const double ll = best_ll + static_cast<double>(w[i]) * (l * l - L[i] * L[i]);
        if (ll > 0.0 && xl * xl * best_ll > best_xl * best_xl * ll) {
          L[i] = static_cast<int8_t>(l);
          best_xl = xl;
          best_ll = ll;
          moved = true;
        }
      }
    }
    if (!moved) break;
  }
  return static_cast<float>(best_xl / best_ll);
}

struct AffineSearch {
  int nmax;           // codes are 0..nmax
  float first, step;  // candidate grids span nmax + first + step * k steps, k = 0..steps
  int steps;
  bool absolute;      // minimize the weighted absolute error rather than the squared one
};

// Codes L in [0, nmax], a scale s >= 0 and an offset m <= 0 with x ~ s L + m, minimizing the
// weighted error over candidate grids between min(x, 0) and max(x), each refit by weighted
// least squares with m held at or below zero (ggml's make_qkx2_quants search). Returns s;
// `neg_min` = -m.
float fit_affine(const float* x, const float* w, int n, const AffineSearch& p, uint8_t* L, float& neg_min) {
  float lo = x[0], hi = x[0];
  double sw = 0.0, swx = 0.0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sw += w[i];
    swx += static_cast<double>(w[i]) * x[i];
  }
  lo = std::min(lo, 0.0f);
  neg_min = -lo;
  if (hi == lo) {
    std::fill(L, L + n, uint8_t{0});
    return 0.0f;
  }
  const auto error_of = [&](const uint8_t* codes, double s, double m) {
    double e = 0.0;
    for (int i = 0; i < n; ++i) {
      const double diff = s * codes[i] + m - x[i];
      e += w[i] * (p.absolute ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  const float range = hi - lo;
  double best_s = range / static_cast<float>(p.nmax), best_m = lo;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_in((x[i] - lo) / static_cast<float>(best_s), 0, p.nmax));
  double best_error = error_of(L, best_s, best_m);
  uint8_t trial[32];
  for (int k = 0; k <= p.steps; ++k) {
    const float iscale = (static_cast<float>(p.nmax) + p.first + p.step * static_cast<float>(k)) / range;
    double sl = 0.0, sll = 0.0, sxl = 0.0;
    for (int i = 0; i < n; ++i) {
      const int l = nearest_in(iscale * (x[i] - lo), 0, p.nmax);
      trial[i] = static_cast<uint8_t>(l);
      sl += static_cast<double>(w[i]) * l;
      sll += static_cast<double>(w[i]) * l * l;
      sxl += static_cast<double>(w[i]) * l * x[i];
    }
    const double det = sw * sll - sl * sl;
    if (!(det > 0.0)) continue;
    double s = (sw * sxl - swx * sl) / det, m = (sll * swx - sl * sxl) / det;
    if (m > 0.0) {  // a positive offset is not representable: refit the scale alone
      m = 0.0;
      s = sxl / sll;
    }
    const double e = error_of(trial, s, m);
    if (e < best_error) {
      std::copy(trial, trial + n, L);
      best_error = e;
      best_s = s;
      best_m = m;
    }
  }
  neg_min = static_cast<float>(-best_m);
  return static_cast<float>(best_s);
}

// Index of the IQ4 level nearest v (the lower one on a tie): the levels ascend, so it is
// the number of midpoints at or below v.
int nearest_iq4_level(float v) {
  int q = 0;
  for (int i = 1; i < 16; ++i)
    if (2.0f * v >= static_cast<float>(kIq4Levels[i - 1] + kIq4Levels[i])) q = i;
  return q;
}

// The IQ4 scale d of a 32-weight (sub-)block minimizing sum w (x - d level)^2: candidate
// grids put the signed extreme on -127 + t or 113 + t (the outermost levels, t = -7..7),
// each refit by least squares; the best is kept. Levels are chosen again later against
// the scale as stored.
float fit_iq4(const float* x, const float* w) {
  const float max = signed_absmax(x, 32);
  if (max == 0.0f) return 0.0f;
  double best_xq = 0.0, best_qq = 0.0;
  for (float outer : {static_cast<float>(kIq4Levels[0]), static_cast<float>(kIq4Levels[15])}) {
    for (int t = -7; t <= 7; ++t) {
      const float id = (outer + static_cast<float>(t)) / max;
      double xq = 0.0, qq = 0.0;
      for (int i = 0; i < 32; ++i) {
        const double q = kIq4Levels[nearest_iq4_level(id * x[i])];
        xq += w[i] * q * x[i];
        qq += w[i] * q * q;
      }
      if (qq > 0.0 && (best_qq == 0.0 || xq * xq * best_qq > best_xq * best_xq * qq)) {
        best_xq = xq;
        best_qq = qq;
      }
    }
  }
  return best_qq > 0.0 ? static_cast<float>(best_xq / best_qq) : 0.0f;
}

// ---- Bit placement, the inverse of each reader in dequantize.cpp.

// Weight e's 2-bit code, Q2_K/Q3_K: e = 128 h + 32 i + l goes to bits 2i of qs[32 h + l].
void pack_two_bits(const uint8_t* codes, uint8_t* qs) {
  std::memset(qs, 0, kSuperBlock / 4);
  for (int e = 0; e < kSuperBlock; ++e) qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((codes[e] & 3) << (2 * (e / 32 % 4)));
}

// Q4_K/Q5_K: e = 64 c + 32 h + l is nibble h of qs[32 c + l]; Q5_K's bit 4 is bit e / 32 of qh[e % 32].
void pack_k_nibbles(const uint8_t* codes, uint8_t* qs, uint8_t* qh) {
  std::memset(qs, 0, kSuperBlock / 2);
  if (qh) std::memset(qh, 0, kSuperBlock / 8);
  for (int e = 0; e < kSuperBlock; ++e) {
    qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>((codes[e] & 0x0f) << (4 * (e / 32 % 2)));
    if (qh) qh[e % 32] |= static_cast<uint8_t>(((codes[e] >> 4) & 1) << (e / 32));
  }
}

// The inverse of kq_scale_min: eight 6-bit scales and mins into 12 bytes.
void pack_scale_min(const int* sc, const int* mn, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int s = 0; s < 8; ++s) {
    if (s < 4) {
      scales[s] = static_cast<uint8_t>(sc[s]);
      scales[s + 4] = static_cast<uint8_t>(mn[s]);
    } else {
      scales[s + 4] = static_cast<uint8_t>((sc[s] & 0x0f) | (mn[s] & 0x0f) << 4);
      scales[s - 4] |= static_cast<uint8_t>((sc[s] >> 4) << 6);
      scales[s] |= static_cast<uint8_t>((mn[s] >> 4) << 6);
    }
  }
}

// Sub-block scales (all >= 0) as codes 0..levels-1 of one super-scale; returns the
// super-scale as stored.
float quantize_unsigned_scales(const float* v, int count, int levels, int* codes, uint16_t& stored) {
  float max = 0.0f;
  for (int s = 0; s < count; ++s) max = std::max(max, v[s]);
  const float top = static_cast<float>(levels - 1);
  const float inv = max > 0.0f ? top / max : 0.0f;
  for (int s = 0; s < count; ++s) codes[s] = nearest_in(inv * v[s], 0, levels - 1);
  stored = f32_to_f16(max / top);
  return f16_to_f32(stored);
}

// ---- The K-quants: 256-weight super-blocks.

// 8 sub-blocks of 32, affine, 6-bit scales and mins: Q4_K (4-bit codes) and Q5_K (5-bit).
// Weights favour large values a little more than plain least squares, av_x + |x|, as
// ggml's reference does.
template <bool kFive>
void q45_k(const float* x, uint8_t* b, size_t d_at, size_t dmin_at, size_t scales_at, size_t qs_at, size_t qh_at) {
  const AffineSearch search = kFive ? AffineSearch{31, -0.5f, 0.1f, 15, false} : AffineSearch{15, -1.0f, 0.1f, 20, false};
  float scale[8], neg_min[8], w[32];
  uint8_t codes[kSuperBlock];
  for (int s = 0; s < 8; ++s) {
    const float* xs = x + 32 * s;
    double sum_x2 = 0.0;
    for (int i = 0; i < 32; ++i) sum_x2 += static_cast<double>(xs[i]) * xs[i];
    const auto av_x = static_cast<float>(std::sqrt(sum_x2 / 32.0));
    for (int i = 0; i < 32; ++i) w[i] = av_x + std::fabs(xs[i]);
    scale[s] = fit_affine(xs, w, 32, search, codes + 32 * s, neg_min[s]);
  }
  int sc[8], mn[8];
  uint16_t d_bits, dmin_bits;
  const float d = quantize_unsigned_scales(scale, 8, 64, sc, d_bits);
  const float dmin = quantize_unsigned_scales(neg_min, 8, 64, mn, dmin_bits);
  store_u16(b + d_at, d_bits);
  store_u16(b + dmin_at, dmin_bits);
  pack_scale_min(sc, mn, b + scales_at);
  for (int s = 0; s < 8; ++s) {
    const float dl = d * static_cast<float>(sc[s]), ml = dmin * static_cast<float>(mn[s]);
    for (int i = 32 * s; i < 32 * s + 32; ++i)
      codes[i] = static_cast<uint8_t>(dl != 0.0f ? nearest_in((x[i] + ml) / dl, 0, search.nmax) : 0);
  }
  pack_k_nibbles(codes, b + qs_at, kFive ? b + qh_at : nullptr);
}

void q4_k(const float* x, uint8_t* b) {
  q45_k<false>(x, b, offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin), offsetof(BlockQ4_K, scales),
               offsetof(BlockQ4_K, qs), 0);
}

void q5_k(const float* x, uint8_t* b) {
  q45_k<true>(x, b, offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin), offsetof(BlockQ5_K, scales),
              offsetof(BlockQ5_K, qs), offsetof(BlockQ5_K, qh));
}

// 16 sub-blocks of 16, affine with 2-bit codes and 4-bit scales and mins. With four levels
// the absolute error, weighted by |x|, fits better than the squared one (ggml's choice).
void q2_k(const float* x, uint8_t* b) {
  const AffineSearch search{3, -0.5f, 0.1f, 15, true};
  float scale[16], neg_min[16], w[16];
  uint8_t codes[kSuperBlock];
  for (int s = 0; s < 16; ++s) {
    const float* xs = x + 16 * s;
    for (int i = 0; i < 16; ++i) w[i] = std::fabs(xs[i]);
    scale[s] = fit_affine(xs, w, 16, search, codes + 16 * s, neg_min[s]);
  }
  int sc[16], mn[16];
  uint16_t d_bits, dmin_bits;
  const float d = quantize_unsigned_scales(scale, 16, 16, sc, d_bits);
  const float dmin = quantize_unsigned_scales(neg_min, 16, 16, mn, dmin_bits);
  store_u16(b + offsetof(BlockQ2_K, d), d_bits);
  store_u16(b + offsetof(BlockQ2_K, dmin), dmin_bits);
  uint8_t* scales = b + offsetof(BlockQ2_K, scales);
  for (int s = 0; s < 16; ++s) {
    scales[s] = static_cast<uint8_t>(sc[s] | mn[s] << 4);
    const float dl = d * static_cast<float>(sc[s]), ml = dmin * static_cast<float>(mn[s]);
    for (int i = 16 * s; i < 16 * s + 16; ++i)
      codes[i] = static_cast<uint8_t>(dl != 0.0f ? nearest_in((x[i] + ml) / dl, 0, 3) : 0);
  }
  pack_two_bits(codes, b + offsetof(BlockQ2_K, qs));
}

// Signed sub-block scales as codes -range..range-1 of one super-scale chosen so that the
// scale of largest magnitude lands on -range (the wider end); returns the super-scale as stored.
float quantize_signed_scales(const float* v, int count, int range, int* codes, uint16_t& stored) {
  const float max = signed_absmax(v, count);
  if (max == 0.0f) {
    std::fill(codes, codes + count, 0);
    stored = 0;
    return 0.0f;
  }
  const float inv = -static_cast<float>(range) / max;
  for (int s = 0; s < count; ++s) codes[s] = nearest_in(inv * v[s], -range, range - 1);
  stored = f32_to_f16(1.0f / inv);
  return f16_to_f32(stored);
}

// The scales of 16 sub-blocks of 16 with codes -nmax..nmax-1, fit with weights x^2, which
// favour the large values as ggml's reference does; then quantized against one super-scale
// that puts the largest on -range. Returns the super-scale as stored (its bits in d_bits).
float symmetric_sub_scales(const float* x, int nmax, int range, int* sc, uint16_t& d_bits) {
  float scale[16], w[16];
  int8_t fit[16];
  for (int s = 0; s < 16; ++s) {
    const float* xs = x + 16 * s;
    for (int i = 0; i < 16; ++i) w[i] = xs[i] * xs[i];
    scale[s] = fit_symmetric(xs, w, 16, nmax, fit);
  }
  return quantize_signed_scales(scale, 16, range, sc, d_bits);
}

// 16 sub-blocks of 16, codes -4..3 (2 low bits + a high bit), 6-bit signed scales.
void q3_k(const float* x, uint8_t* b) {
  int sc[16];
  uint16_t d_bits;
  const float d = symmetric_sub_scales(x, 4, 32, sc, d_bits);
  store_u16(b + offsetof(BlockQ3_K, d), d_bits);
  uint8_t* scales = b + offsetof(BlockQ3_K, scales);
  std::memset(scales, 0, 12);
  uint8_t codes[kSuperBlock];
  uint8_t* hmask = b + offsetof(BlockQ3_K, hmask);
  std::memset(hmask, 0, kSuperBlock / 8);
  for (int s = 0; s < 16; ++s) {
    const int scale6 = sc[s] + 32;
    scales[s % 8] |= static_cast<uint8_t>((scale6 & 0x0f) << (4 * (s / 8)));
    scales[8 + s % 4] |= static_cast<uint8_t>((scale6 >> 4) << (2 * (s / 4)));
    const float dl = d * static_cast<float>(sc[s]);
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      // Stored as q = l + 4 in 0..7: a set high bit means no offset when read back.
      const int q = (dl != 0.0f ? nearest_in(x[e] / dl, -4, 3) : 0) + 4;
      codes[e] = static_cast<uint8_t>(q & 3);
      hmask[e % 32] |= static_cast<uint8_t>((q >> 2) << (e / 32));
    }
  }
  pack_two_bits(codes, b + offsetof(BlockQ3_K, qs));
}

// 16 sub-blocks of 16, codes -32..31, 8-bit signed scales.
void q6_k(const float* x, uint8_t* b) {
  int sc[16];
  uint16_t d_bits;
  const float d = symmetric_sub_scales(x, 32, 128, sc, d_bits);
  store_u16(b + offsetof(BlockQ6_K, d), d_bits);
  auto* scales = reinterpret_cast<int8_t*>(b + offsetof(BlockQ6_K, scales));
  uint8_t* ql = b + offsetof(BlockQ6_K, ql);
  uint8_t* qh = b + offsetof(BlockQ6_K, qh);
  std::memset(ql, 0, kSuperBlock / 2);
  std::memset(qh, 0, kSuperBlock / 4);
  for (int s = 0; s < 16; ++s) {
    scales[s] = static_cast<int8_t>(sc[s]);
    const float dl = d * static_cast<float>(sc[s]);
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      const int q = (dl != 0.0f ? nearest_in(x[e] / dl, -32, 31) : 0) + 32;
      const int c = e / 128, r = e % 128;
      ql[64 * c + r % 64] |= static_cast<uint8_t>((q & 0x0f) << (4 * (r / 64)));
      qh[32 * c + r % 32] |= static_cast<uint8_t>((q >> 4) << (2 * (r / 32)));
    }
  }
}

// ---- IQ4: 16 non-uniform levels, weights x^2 as ggml's reference uses without an
// importance matrix.

void iq4_weights(const float* x, float* w) {
  for (int i = 0; i < 32; ++i) w[i] = x[i] * x[i];
}

// Levels of 32 weights against the scale dl as stored, packed as a 32-weight block of nibbles.
void pack_iq4_levels(const float* x, float dl, uint8_t* qs) {
  const float inv = dl != 0.0f ? 1.0f / dl : 0.0f;
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = nearest_iq4_level(x[j] * inv);
  pack_nibbles(q, qs);
}

void iq4_nl(const float* x, uint8_t* b) {
  float w[32];
  iq4_weights(x, w);
  const uint16_t d = f32_to_f16(fit_iq4(x, w));
  store_u16(b + offsetof(BlockIQ4_NL, d), d);
  pack_iq4_levels(x, f16_to_f32(d), b + offsetof(BlockIQ4_NL, qs));
}

// 8 sub-blocks of 32, each with its own IQ4 scale quantized to 6 signed bits.
void iq4_xs(const float* x, uint8_t* b) {
  float scale[8], w[32];
  for (int s = 0; s < 8; ++s) {
    iq4_weights(x + 32 * s, w);
    scale[s] = fit_iq4(x + 32 * s, w);
  }
  int sc[8];
  uint16_t d_bits;
  const float d = quantize_signed_scales(scale, 8, 32, sc, d_bits);
  store_u16(b + offsetof(BlockIQ4_XS, d), d_bits);
  uint16_t scales_h = 0;
  uint8_t* scales_l = b + offsetof(BlockIQ4_XS, scales_l);
  std::memset(scales_l, 0, kSuperBlock / 64);
  for (int s = 0; s < 8; ++s) {
    const int scale6 = sc[s] + 32;
    scales_l[s / 2] |= static_cast<uint8_t>((scale6 & 0x0f) << (4 * (s % 2)));
    scales_h = static_cast<uint16_t>(scales_h | (scale6 >> 4) << (2 * s));
    pack_iq4_levels(x + 32 * s, d * static_cast<float>(sc[s]), b + offsetof(BlockIQ4_XS, qs) + 16 * s);
  }
  store_u16(b + offsetof(BlockIQ4_XS, scales_h), scales_h);
}

using BlockEncoder = void (*)(const float*, uint8_t*);

BlockEncoder encoder_for(DType t) {
  switch (t) {
    case DType::Q8_0: return q8_0;
    case DType::Q4_0: return q4_0;
    case DType::Q4_1: return q4_1;
    case DType::Q5_0: return q5_0;
    case DType::Q5_1: return q5_1;
    case DType::Q2_K: return q2_k;
    case DType::Q3_K: return q3_k;
    case DType::Q4_K: return q4_k;
    case DType::Q5_K: return q5_k;
    case DType::Q6_K: return q6_k;
    case DType::IQ4_NL: return iq4_nl;
    case DType::IQ4_XS: return iq4_xs;
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;
  }
  throw std::logic_error(std::string("quantize_blocks: ") + dtype_name(t) + " is not a block type");
}

}  // namespace

void quantize_blocks(DType t, const float* src, int64_t n, uint8_t* dst) {
  const BlockEncoder encode = encoder_for(t);
  const int64_t elems = dtype_block_elems(t);
  const size_t bytes = dtype_block_bytes(t);
  for (int64_t b = 0; b < n / elems; ++b) encode(src + b * elems, dst + static_cast<size_t>(b) * bytes);
}

}  // namespace orzo::cpu
