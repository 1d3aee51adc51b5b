#pragma once
// The int8 products of the block types on AVX2 (isa/matmul_q8.cpp): groups of blocks with
// lanes along k, for many rows and a few, and packed Q4_K rows as words at any m. Include
// it after int8_product.hpp, inside the ORZO_TARGET_BEGIN region.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/quant_blocks.hpp"
#include "core/tensor.hpp"
#include "kernels/cpu/isa/int8_product.hpp"
#include "kernels/cpu/packed_rows.hpp"

#if defined(ORZO_Q8_AVX2)

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): internal linkage, as target.hpp explains

using IVec = __m256i;
using FVec = __m256;
constexpr int kIntLanes = 8;
inline IVec izero() { return _mm256_setzero_si256(); }
inline FVec fzero() { return _mm256_setzero_ps(); }
inline FVec fload(const float* p) { return _mm256_load_ps(p); }
inline FVec fmadd(FVec a, FVec b, FVec c) { return _mm256_fmadd_ps(a, b, c); }
inline FVec fmul(FVec a, FVec b) { return _mm256_mul_ps(a, b); }
inline FVec to_float(IVec v) { return _mm256_cvtepi32_ps(v); }
inline float fsum(FVec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A group is kIntLanes / 2 blocks of 32 weights, held in four vectors of codes. Lane
// 2b + h of vector t holds bytes 16h + 4t .. 16h + 4t + 3 of block b: each lane's four
// integer products belong to one half of one block, so the halves' scales (K-quants with
// 16-weight sub-blocks) and the blocks' scales apply lane by lane, once per group, rather
// than once per block after a horizontal sum.
constexpr int kGroupBlocks = kIntLanes / 2;
constexpr int64_t kGroupWeights = 32 * kGroupBlocks;

inline void interleave(const __m256i* blocks, IVec* out) {
  // Within a block, dwords t and t + 4 become qword t; then a 4 x 4 transpose of qwords.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i p[4];
  for (int b = 0; b < 4; ++b) p[b] = _mm256_permutevar8x32_epi32(blocks[b], order);
  const __m256i lo01 = _mm256_unpacklo_epi64(p[0], p[1]), hi01 = _mm256_unpackhi_epi64(p[0], p[1]);
  const __m256i lo23 = _mm256_unpacklo_epi64(p[2], p[3]), hi23 = _mm256_unpackhi_epi64(p[2], p[3]);
  out[0] = _mm256_permute2x128_si256(lo01, lo23, 0x20);
  out[1] = _mm256_permute2x128_si256(hi01, hi23, 0x20);
  out[2] = _mm256_permute2x128_si256(lo01, lo23, 0x31);
  out[3] = _mm256_permute2x128_si256(hi01, hi23, 0x31);
}

// One group of a quantized activation row, in one int8 digit or two as on AVX-512
// (ActivationBlock: x = scale * (256 * q[0] + q[1])), but for the second digit's range:
// ±127, not -128 .. 127, since the sign trick's _mm256_sign_epi8 cannot negate -128. A
// remainder past 127/256 of a step rounds to 127, off by at most a 256th of a step.
template <int Digits>
struct ActivationGroup {
  static constexpr int kDigits = Digits;
  static int64_t units(int64_t k) { return (k / 32 + kGroupBlocks - 1) / kGroupBlocks; }
  IVec q[Digits][4];
  IVec correction;  // -bias * (the codes' value in steps of scale, in the lane's half): the integer sum's start
  alignas(64) float scale[kIntLanes];       // the block's scale (over 256 for two digits), in both of its lanes
  alignas(64) float scaled_sum[kIntLanes];  // scale * that value, for the offsets
};

// One group of a decoded weight row. Aligned explicitly: std::vector's allocator is
// instantiated where the target pragma no longer holds, and there GCC takes a vector
// member's alignment for 16, so it would allocate the panel with plain operator new.
struct alignas(64) WeightGroup {
  IVec q[4];  // q + bias, or |q| under the sign trick
  IVec sign[4];  // q itself, for the sign trick only
  // Lane by lane, as Codes. Built in registers, never from scalar stores: a vector load of
  // those would wait for them to retire, and the gemv reads them right away.
  FVec d, m;
};

template <int Digits>
using ActivationOf = ActivationGroup<Digits>;

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// 32 int32 codes as bytes in the weights' order: the packs interleave 128-bit lanes, and
// the permutation restores it.
inline __m256i pack_codes(const __m256i (&q)[4]) {
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One 32-float block of x rounded: q[digit][i] holds the codes of x[8i .. 8i + 7], and the
// block's value is scale * (256 * q[0] + q[1]) with two digits. Rounds to nearest (even on
// ties, the default MXCSR mode); a block of zeros has scale 0.
template <int Digits>
struct RoundedBlock {
  __m256i q[Digits][4];
  float scale;
};

template <int Digits>
inline RoundedBlock<Digits> round_block(const float* x) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4], amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 a = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  a = _mm_max_ps(a, _mm_movehl_ps(a, a));
  a = _mm_max_ss(a, _mm_movehdup_ps(a));
  const float top = _mm_cvtss_f32(a);
  const float d = top / 127.0f;
  const __m256 inv = _mm256_set1_ps(top > 0.0f ? 127.0f / top : 0.0f);
  RoundedBlock<Digits> out;
  for (int i = 0; i < 4; ++i) {
    const __m256 steps = _mm256_mul_ps(v[i], inv);
    out.q[0][i] = _mm256_cvtps_epi32(steps);
    if constexpr (Digits == 2) {
      const __m256 left = _mm256_sub_ps(steps, _mm256_cvtepi32_ps(out.q[0][i]));
      const __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(left, _mm256_set1_ps(256.0f)));
      out.q[1][i] = _mm256_max_epi32(_mm256_min_epi32(r, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
    }
  }
  out.scale = Digits == 2 ? d / 256.0f : d;
  return out;
}

template <int Digits>
void quantize_row(const float* x, int64_t k, int bias, ActivationGroup<Digits>* out) {
  const int64_t blocks = k / 32;
  for (int64_t g = 0; g * kGroupBlocks < blocks; ++g) {
    __m256i codes[Digits][kGroupBlocks];
    ActivationGroup<Digits>& o = out[g];
    float* scale = o.scale;
    float* scaled_sum = o.scaled_sum;
    alignas(64) int32_t correction[kIntLanes];
    for (int b = 0; b < kGroupBlocks; ++b) {
      const int64_t block = g * kGroupBlocks + b;
      if (block >= blocks) {
        for (auto& digit : codes) digit[b] = _mm256_setzero_si256();
        scale[2 * b] = scale[2 * b + 1] = scaled_sum[2 * b] = scaled_sum[2 * b + 1] = 0.0f;
        correction[2 * b] = correction[2 * b + 1] = 0;
        continue;
      }
      const RoundedBlock<Digits> rounded = round_block<Digits>(x + 32 * block);
      const auto& q = rounded.q;
      int sums[2] = {0, 0};
      for (int digit = 0; digit < Digits; ++digit) {
        for (int h = 0; h < 2; ++h)
          sums[h] = 256 * sums[h] + hsum_epi32(_mm256_add_epi32(q[digit][2 * h], q[digit][2 * h + 1]));
        codes[digit][b] = pack_codes(q[digit]);
      }
      const float step = rounded.scale;
      for (int h = 0; h < 2; ++h) {
        scale[2 * b + h] = step;
        scaled_sum[2 * b + h] = step * static_cast<float>(sums[h]);
        correction[2 * b + h] = -bias * sums[h];
      }
    }
    for (int digit = 0; digit < Digits; ++digit) interleave(codes[digit], o.q[digit]);
    std::memcpy(&o.correction, correction, sizeof o.correction);
  }
}

// Codes of `count` consecutive 32-weight sub-blocks into one group, the first being
// sub-block `sub` of the unit at `unit`. Missing blocks of a last group meet zero
// activation codes, so any finite value does for them.
template <class F>
inline void decode_group(const uint8_t* unit, int sub, int count, WeightGroup& o) {
  __m256i codes[kGroupBlocks];
  [[maybe_unused]] float d[kIntLanes], m[kIntLanes];
#pragma GCC unroll 8
  for (int b = 0; b < kGroupBlocks; ++b) {
    Codes c{_mm256_setzero_si256(), {0, 0}, {0, 0}};
    if (b < count) c = F::codes(unit + (sub + b) / F::kSubs * F::kStepBytes, (sub + b) % F::kSubs);
    codes[b] = c.q;
    if constexpr (!kUnitScales<F>)
      for (int h = 0; h < 2; ++h) {
        d[2 * b + h] = c.d[h];
        m[2 * b + h] = c.m[h];
      }
  }
  if constexpr (kUnitScales<F>) {
    static_assert(F::kSubs % kGroupBlocks == 0, "a group's blocks lie in one super-block");
    // The same values as codes() gives: d * code and -(dmin * code), one rounding each.
    // Lane l takes part sub * kPartsPerSub + l * kPartsPerSub / 2 of the unpacked scales.
    const typename F::Scales scales = F::scales(unit);
    constexpr int kPartsPerSub = static_cast<int>(sizeof(F::Scales::d) / sizeof(float)) / F::kSubs;
    static_assert(kPartsPerSub == 1 || kPartsPerSub == 2, "a sub-block's scales, whole or by halves");
    if constexpr (kPartsPerSub == 2) {
      o.d = _mm256_loadu_ps(scales.d + 2 * sub);
      o.m = F::kHasMin ? _mm256_loadu_ps(scales.m + 2 * sub) : fzero();
    } else {
      static_assert(sizeof(F::Scales::d) == kIntLanes * sizeof(float), "one vector of parts");
      const __m256i parts = _mm256_add_epi32(_mm256_set1_epi32(sub), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
      o.d = _mm256_permutevar8x32_ps(_mm256_loadu_ps(scales.d), parts);
      o.m = F::kHasMin ? _mm256_permutevar8x32_ps(_mm256_loadu_ps(scales.m), parts) : fzero();
    }
  } else {
    o.d = _mm256_setr_ps(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
    o.m = _mm256_setr_ps(m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]);
  }
  if constexpr (kSignTrick<F>) {
    interleave(codes, o.sign);
    for (int t = 0; t < 4; ++t) o.q[t] = _mm256_abs_epi8(o.sign[t]);
  } else {
    for (auto& c : codes) c = _mm256_add_epi8(c, _mm256_set1_epi8(static_cast<char>(F::kBias)));
    interleave(codes, o.q);
  }
}

// Calls visit(offset, sub, count, fetch, g) for each group g of a row of k weights: its
// `count` sub-blocks start at sub-block `sub` of the unit `offset` bytes into the row, and
// the `fetch` bytes from there are the next ones the walk reads (a whole unit at once). A
// super-block is one group or two, whose sub-block indices fold to constants.
template <class F, class Visit>
inline void for_each_group(int64_t k, Visit&& visit) {
  const int64_t units = k / F::kStep;
  if constexpr (F::kSubs >= kGroupBlocks) {
    constexpr int kParts = F::kSubs / kGroupBlocks;
    for (int64_t u = 0; u < units; ++u)
#pragma GCC unroll 2
      for (int part = 0; part < kParts; ++part)
        visit(u * F::kStepBytes, part * kGroupBlocks, kGroupBlocks, part == 0 ? F::kStepBytes : 0, u * kParts + part);
  } else {
    for (int64_t g = 0; g * kGroupBlocks < units; ++g) {
      const int count = static_cast<int>(std::min<int64_t>(kGroupBlocks, units - g * kGroupBlocks));
      visit(g * kGroupBlocks * F::kStepBytes, 0, count, count * F::kStepBytes, g);
    }
  }
}

// `ahead` (or null) is a row to fetch into cache meanwhile: the hardware prefetchers do
// not run far enough ahead of a decode this short to hide the memory's latency (measured
// on Zen 4, m = 1, one core: Q8_0 and Q4_0 from 0.7 to 1.0 of the f32 kernel's speed).
template <class F>
void decode_row(const uint8_t* row, int64_t k, const uint8_t* ahead, WeightGroup* out) {
  for_each_group<F>(k, [&](int64_t offset, int sub, int count, int64_t fetch, int64_t g) {
    if (ahead) prefetch(ahead + offset, fetch);
    decode_group<F>(row + offset, sub, count, out[g]);
  });
}

// How many vpmaddubsw results of F's codes add up in int16 before vpmaddwd widens them:
// each is at most 2 * (2^kCodeBits - 1) * 127, or 2 * 128 * 127 under the sign trick, and
// their sum must stay below 2^15 (Q4_K: all four of a group's, Q6_K: two, Q8_0: one).
template <class F>
constexpr int kShortSums = kSignTrick<F> ? 1 : std::min(4, 32767 / (2 * 127 * ((1 << F::kCodeBits) - 1)));
static_assert(kShortSums<Q6_KFormat> == 2 && kShortSums<Q5_KFormat> == 4, "the bound as the comment gives it");

// The exact integer products of one group, per lane, from `acc`: each digit's pair sums
// in int16 as long as they fit, and the first digit's weighted by 256 as they widen.
template <class F, int Digits>
inline IVec group_dot(IVec acc, const WeightGroup& w, const ActivationGroup<Digits>& x) {
  constexpr int kShort = kShortSums<F>;
  static_assert(4 % kShort == 0, "whole runs of a group's vectors");
#pragma GCC unroll 2
  for (int digit = 0; digit < Digits; ++digit) {
    const __m256i weight = _mm256_set1_epi16(Digits == 2 && digit == 0 ? 256 : 1);
#pragma GCC unroll 4
    for (int t = 0; t < 4; t += kShort) {
      __m256i pairs = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int u = t; u < t + kShort; ++u) {
        const __m256i xs = kSignTrick<F> ? _mm256_sign_epi8(x.q[digit][u], w.sign[u]) : x.q[digit][u];
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w.q[u], xs));
      }
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, weight));
    }
  }
  return acc;
}

// acc + the scaled products of one group: the arithmetic of both the panel's tile and
// the gemv, which is why the two agree bit for bit.
template <class F, int Digits>
inline FVec group_step(FVec acc, const WeightGroup& w, const ActivationGroup<Digits>& a) {
  const IVec p = group_dot<F, Digits>(kActivationBias<F> != 0 ? a.correction : izero(), w, a);
  acc = fmadd(to_float(p), fmul(w.d, fload(a.scale)), acc);
  if constexpr (F::kHasMin) acc = fmadd(w.m, fload(a.scaled_sum), acc);
  return acc;
}

// out[r][i] = dot(weight row r, activation row i) over all groups. Each (r, i) runs the
// same operations in the same order whatever R and M are, which is the batch invariance.
template <class F, int Digits, int R, int M>
void tile(const WeightGroup* w, int64_t w_stride, const ActivationGroup<Digits>* x, int64_t x_stride, int64_t groups,
          float (&out)[R][M]) {
  FVec acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) acc[r][i] = fzero();
  for (int64_t g = 0; g < groups; ++g) {
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const ActivationGroup<Digits>& a = x[i * x_stride + g];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[r][i] = group_step<F, Digits>(acc[r][i], w[r * w_stride + g], a);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) out[r][i] = fsum(acc[r][i]);
}

constexpr int kTileRows = 2, kTileCols = 3;
// Weight rows decoded together: their codes (1.5 to 2.5 bytes a weight) stay in L2 while
// every activation row passes over them, and each weight row is decoded once per call.
constexpr int64_t kPanelRows = 32;
constexpr int64_t kPrefetchRows = 4;

template <class F, int Digits, int R, int M>
void tile_into(const Job<ActivationOf<Digits>>& job, const WeightGroup* panel, int64_t j, int64_t r0, int64_t i0) {
  float out[R][M];
  tile<F, Digits, R, M>(panel + r0 * job.units, job.units, job.x + i0 * job.units, job.units, job.units, out);
  for (int r = 0; r < R; ++r) {
    const float b = job.bias ? job.bias[j + r0 + r] : 0.0f;
    for (int i = 0; i < M; ++i) job.y[(i0 + i) * job.n + j + r0 + r] = out[r][i] + b;
  }
}

template <class F, int Digits, int R>
void tile_rows(const Job<ActivationOf<Digits>>& job, const WeightGroup* panel, int64_t j, int64_t r0, int64_t i0, int64_t cols) {
  static_assert(kTileCols <= 4, "one case per tile width");
  switch (cols) {
    case 4: if constexpr (kTileCols >= 4) tile_into<F, Digits, R, 4>(job, panel, j, r0, i0); break;
    case 3: tile_into<F, Digits, R, 3>(job, panel, j, r0, i0); break;
    case 2: tile_into<F, Digits, R, 2>(job, panel, j, r0, i0); break;
    default: tile_into<F, Digits, R, 1>(job, panel, j, r0, i0); break;
  }
}

// A packed pair's codes (packed_rows.hpp) turned: 16 vectors of 16 rows' words (a word is
// two codes of a row) become each row's 32 bytes of qs[32p..], by a 16 x 16 transpose of
// words: 8 x 8 in each 128-bit lane, then the lanes' halves joined.
inline void transpose_pairs(const uint8_t (*pairs)[2 * kPackedRows], __m256i (&rows)[kPackedRows]) {
  __m256i turned[2][8];  // [j / 8][row % 8]: lane row / 8 holds pairs 8 (j / 8) .. + 7
  for (int half = 0; half < 2; ++half) {
    __m256i v[8], w[8];
    for (int j = 0; j < 8; ++j) v[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pairs[8 * half + j]));
    for (int j = 0; j < 8; j += 2) w[j] = _mm256_unpacklo_epi16(v[j], v[j + 1]), w[j + 1] = _mm256_unpackhi_epi16(v[j], v[j + 1]);
    for (int a = 0; a < 8; a += 4)
      for (int c = 0; c < 2; ++c) {
        v[a + 2 * c] = _mm256_unpacklo_epi32(w[a + c], w[a + c + 2]);
        v[a + 2 * c + 1] = _mm256_unpackhi_epi32(w[a + c], w[a + c + 2]);
      }
    for (int c = 0; c < 4; ++c) {
      turned[half][2 * c] = _mm256_unpacklo_epi64(v[c], v[c + 4]);
      turned[half][2 * c + 1] = _mm256_unpackhi_epi64(v[c], v[c + 4]);
    }
  }
  for (int r = 0; r < 8; ++r) {
    rows[r] = _mm256_permute2x128_si256(turned[0][r], turned[1][r], 0x20);
    rows[r + 8] = _mm256_permute2x128_si256(turned[0][r], turned[1][r], 0x31);
  }
}

// Eight rows of a packed tile's (packed_rows.hpp) f16 scale, or of a byte scale, as f32 lanes.
inline __m256 rows_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 rows_u8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// v[i] lane j becomes v[j] lane i.
inline void transpose8(__m256 (&v)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]), t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  for (int i = 0; i < 8; i += 4)
    for (int c = 0; c < 2; ++c) {
      u[i + 2 * c] = _mm256_shuffle_ps(t[i + c], t[i + c + 2], 0x44);
      u[i + 2 * c + 1] = _mm256_shuffle_ps(t[i + c], t[i + c + 2], 0xee);
    }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Each row's eight sub-blocks' d * sc (and -dmin * mn) of a packed tile, as Q4_KFormat::scales
// gives them for the row as stored: the same products.
struct RowScales {
  __m256 d[kPackedRows], m[kPackedRows];
};
inline void row_scales(const PackedQ4_KTile& t, RowScales& out) {
  for (int half = 0; half < 2; ++half) {
    const __m256 d = rows_f16(t.d + 8 * half), dmin = _mm256_sub_ps(fzero(), rows_f16(t.dmin + 8 * half));
    __m256 sc[8], mn[8];  // [sub-block], lane: row
    for (int s = 0; s < 8; ++s) {
      sc[s] = _mm256_mul_ps(rows_u8(t.sc[s] + 8 * half), d);
      mn[s] = _mm256_mul_ps(rows_u8(t.mn[s] + 8 * half), dmin);
    }
    transpose8(sc);
    transpose8(mn);
    for (int r = 0; r < 8; ++r) out.d[8 * half + r] = sc[r], out.m[8 * half + r] = mn[r];
  }
}

// A packed group's 16 rows straight into their weight groups, `stride` groups a row apart:
// decode_row's groups of the rows as stored, bit for bit (the same codes, and the scales
// the same products d * code), without the stored bytes between.
inline void decode_packed_rows(const PackedQ4_KTile* tiles, int64_t units, WeightGroup* out, int64_t stride) {
  static_assert(Q4_KFormat::kBias == 0 && Q4_KFormat::kSubs == 2 * kGroupBlocks, "two groups a super-block");
  for (int64_t u = 0; u < units; ++u) {
    const PackedQ4_KTile& t = tiles[u];
    prefetch_tile(tiles, u);
    RowScales scales;
    row_scales(t, scales);
    for (int part = 0; part < 2; ++part) {  // sub-blocks 4 part .. 4 part + 3
      __m256i qs[2][kPackedRows];
      for (int c = 0; c < 2; ++c) transpose_pairs(t.codes[2 * part + c], qs[c]);
      const __m256i low = _mm256_set1_epi8(0x0f);
      for (int r = 0; r < kPackedRows; ++r) {
        WeightGroup& o = out[r * stride + 2 * u + part];
        __m256i codes[kGroupBlocks];
        for (int c = 0; c < 2; ++c) {
          codes[2 * c] = _mm256_and_si256(qs[c][r], low);
          codes[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(qs[c][r], 4), low);
        }
        interleave(codes, o.q);
        // Lane 2b + h: sub-block 4 part + b's, as decode_group spreads them.
        const __m256i parts = _mm256_add_epi32(_mm256_set1_epi32(4 * part), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        o.d = _mm256_permutevar8x32_ps(scales.d[r], parts);
        o.m = _mm256_permutevar8x32_ps(scales.m[r], parts);
      }
    }
  }
}

template <class F, int Digits>
void rows_range(const Job<ActivationOf<Digits>>& job, int64_t begin, int64_t end) {
  thread_local std::vector<WeightGroup> scratch;
  scratch.resize(std::max(scratch.size(), static_cast<size_t>(kPanelRows * job.units)));
  for (int64_t j = begin; j < end; j += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, end - j);
    bool decoded = false;
    if constexpr (std::is_same_v<F, Q4_KFormat>)
      if (job.packed) {
        // Rows come in whole groups where they are packed (packs_rows), and j is one's first.
        const int64_t units = job.k / kSuperBlock;
        for (int64_t g = 0; g < rows; g += kPackedRows)
          decode_packed_rows(static_cast<const PackedQ4_KTile*>(job.packed) + (j + g) / kPackedRows * units, units,
                             scratch.data() + g * job.units, job.units);
        decoded = true;
      }
    for (int64_t r = 0; r < rows && !decoded; ++r) {
      const uint8_t* row = job.w + (j + r) * job.row_bytes;
      const uint8_t* ahead = j + r + kPrefetchRows < end ? row + kPrefetchRows * job.row_bytes : nullptr;
      decode_row<F>(row, job.k, ahead, scratch.data() + r * job.units);
    }
    for (int64_t i0 = 0; i0 < job.m; i0 += kTileCols) {
      const int64_t cols = std::min<int64_t>(kTileCols, job.m - i0);
      int64_t r0 = 0;
      for (; r0 + kTileRows <= rows; r0 += kTileRows) tile_rows<F, Digits, kTileRows>(job, scratch.data(), j, r0, i0, cols);
      for (; r0 < rows; ++r0) tile_rows<F, Digits, 1>(job, scratch.data(), j, r0, i0, cols);
    }
  }
}

// A few activation rows (decode) meet each group of R weight rows as soon as it is
// decoded, with no panel between: the panel's stores and loads would cost as much as the
// products when one activation row shares them. Each (row, activation row) runs tile()'s
// operations in tile()'s order, so the results are the panel's bit for bit and matmul()
// stays batch-invariant where it switches between the two.
template <int Digits>
using GemvActivationOf = ActivationGroup<Digits>;
constexpr int kGemvRows = 2;

template <class F, int Digits, int R, int M>
void gemv_rows_into(const Job<ActivationGroup<Digits>>& job, int64_t j, int64_t end) {
  FVec acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) acc[r][i] = fzero();
  const uint8_t* rows = job.w + j * job.row_bytes;
  const uint8_t* next = j + 2 * R <= end ? rows + R * job.row_bytes : nullptr;
  for_each_group<F>(job.k, [&](int64_t offset, int sub, int count, int64_t fetch, int64_t g) {
    WeightGroup w[R];
    for (int r = 0; r < R; ++r) {
      if (next) prefetch(next + r * job.row_bytes + offset, fetch);
      decode_group<F>(rows + r * job.row_bytes + offset, sub, count, w[r]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < M; ++i) {
      const ActivationGroup<Digits>& a = job.x[i * job.units + g];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][i] = group_step<F, Digits>(acc[r][i], w[r], a);
    }
  });
  for (int r = 0; r < R; ++r) {
    const float b = job.bias ? job.bias[j + r] : 0.0f;
    for (int i = 0; i < M; ++i) job.y[i * job.n + j + r] = fsum(acc[r][i]) + b;
  }
}

template <class F, int Digits, int M>
void gemv_rows(const Job<ActivationGroup<Digits>>& job, int64_t begin, int64_t end) {
  int64_t j = begin;
  for (; j + kGemvRows <= end; j += kGemvRows) gemv_rows_into<F, Digits, kGemvRows, M>(job, j, end);
  for (; j < end; ++j) gemv_rows_into<F, Digits, 1, M>(job, j, end);
}

// Words for the packed products, rounded as quantize_row rounds two digits: rows
// [begin, end) of x into `out`, which resize() has made room for.
inline void quantize_words(const float* x, int64_t begin, int64_t end, int64_t k, WordRows& out) {
  const int64_t count = k / 32;
  for (int64_t i = begin; i < end; ++i)
    for (int64_t b = 0; b < count; ++b) {
      const RoundedBlock<2> r = round_block<2>(x + i * k + 32 * b);
      __m256i value[4];
      for (int v = 0; v < 4; ++v) value[v] = _mm256_add_epi32(_mm256_slli_epi32(r.q[0][v], 8), r.q[1][v]);
      int16_t* q = out.q.data() + i * k + 32 * b;
      // packs interleaves 128-bit lanes; the permutation restores the order.
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16 * h),
                            _mm256_permute4x64_epi64(_mm256_packs_epi32(value[2 * h], value[2 * h + 1]), 0xd8));
      const size_t at = static_cast<size_t>(i * count + b);
      out.scale[at] = r.scale;
      out.sum[at] = r.scale * static_cast<float>(hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(value[0], value[1]),
                                                                             _mm256_add_epi32(value[2], value[3]))));
    }
}

// Q4_K on rows packed side by side (packed_rows.hpp) against activation rows i0 .. i0 + M - 1
// as words, in two vectors of eight rows: vpmaddwd meets a row's two codes with the broadcast
// activation pair, and a sub-block's sums are scaled once per eight rows. Each output runs
// the same operations in the same order whatever M and i0 are, so a prompt's rows get the
// bits the gemv gives them alone. Two digits as one word cost one vpmaddwd and one add per
// 16 products, where two digits on bytes cost two vpmaddubsw, their widening and the
// digits' merge per 32 (the panel below).
template <int M>
void packed_group(const PackedQ4_KTile* tiles, int64_t units, const WordRows& x, int64_t i0, __m256 (&out)[M][2]) {
  const int64_t blocks = x.k / 32;
  for (int i = 0; i < M; ++i) out[i][0] = out[i][1] = fzero();
  for (int64_t u = 0; u < units; ++u) {
    const PackedQ4_KTile& t = tiles[u];
    prefetch_tile(tiles, u);
    for (int half = 0; half < 2; ++half) {  // rows 8 half .. 8 half + 7
      const __m256 d = rows_f16(t.d + 8 * half), dmin = rows_f16(t.dmin + 8 * half);
      for (int p = 0; p < 4; ++p) {  // sub-blocks 2p (low nibbles) and 2p + 1 (high)
        __m256i sums[2][M];
        for (int h = 0; h < 2; ++h)
          for (int i = 0; i < M; ++i) sums[h][i] = izero();
#pragma GCC unroll 4
        for (int j = 0; j < 16; ++j) {
          const __m256i words = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.codes[p][j] + 16 * half)));
          const __m256i codes[2] = {_mm256_and_si256(words, _mm256_set1_epi16(0x0f)), _mm256_srli_epi16(words, 4)};
          for (int i = 0; i < M; ++i)
            for (int h = 0; h < 2; ++h) {
              const __m256i pair = _mm256_set1_epi32(word_pair(x, i0 + i, u * kSuperBlock + 64 * p + 32 * h + 2 * j));
              sums[h][i] = _mm256_add_epi32(_mm256_madd_epi16(codes[h], pair), sums[h][i]);
            }
        }
        for (int h = 0; h < 2; ++h) {
          const int s = 2 * p + h;
          const __m256 scale = _mm256_mul_ps(d, rows_u8(t.sc[s] + 8 * half));
          const __m256 min = _mm256_mul_ps(dmin, rows_u8(t.mn[s] + 8 * half));
          for (int i = 0; i < M; ++i) {
            const int64_t b = (i0 + i) * blocks + 8 * u + s;
            out[i][half] = _mm256_fmadd_ps(to_float(sums[h][i]), _mm256_mul_ps(scale, _mm256_set1_ps(x.scale[b])), out[i][half]);
            out[i][half] = _mm256_fnmadd_ps(min, _mm256_set1_ps(x.sum[b]), out[i][half]);
          }
        }
      }
    }
  }
}

template <int M>
void packed_into(const Job<WordRows>& job, int64_t j, int64_t i0) {
  __m256 out[M][2];
  packed_group<M>(static_cast<const PackedQ4_KTile*>(job.packed) + (j / kPackedRows) * (job.k / kSuperBlock),
                  job.k / kSuperBlock, *job.x, i0, out);
  for (int half = 0; half < 2; ++half) {
    const __m256 bias = job.bias ? _mm256_loadu_ps(job.bias + j + 8 * half) : fzero();
    for (int i = 0; i < M; ++i) _mm256_storeu_ps(job.y + (i0 + i) * job.n + j + 8 * half, _mm256_add_ps(out[i][half], bias));
  }
}

// Activation rows a packed group meets at once: 2M accumulators, two code vectors, the
// mask and the broadcast pairs within AVX2's 16 registers. At four GCC spilled an
// accumulator and copied each result a step, 2-7 % slower (matmul_bench, one thread).
constexpr int64_t kWordRows = 3;
// Activation rows' words a thread's groups pass over before the next rows: at 512 rows
// 64 KiB ran level with 256 KiB and 1 MiB, and steadiest.
constexpr int64_t kWordBlockBytes = int64_t{64} << 10;

void packed_rows(const Job<WordRows>& job, int64_t begin, int64_t end) {
  static_assert(kWordRows == 3, "one case per remainder");
  const int64_t block = std::max(kWordRows, kWordBlockBytes / (job.k * 2) / kWordRows * kWordRows);
  for (int64_t b0 = 0; b0 < job.m; b0 += block) {
    const int64_t b1 = std::min(job.m, b0 + block);
    for (int64_t j = begin; j < end; j += kPackedRows) {
      int64_t i = b0;
      for (; i + kWordRows <= b1; i += kWordRows) packed_into<kWordRows>(job, j, i);
      switch (b1 - i) {
        case 3: packed_into<3>(job, j, i); break;
        case 2: packed_into<2>(job, j, i); break;
        case 1: packed_into<1>(job, j, i); break;
        default: break;
      }
    }
  }
}

}  // namespace
}  // namespace orzo::cpu::ORZO_ISA_NS

#endif
