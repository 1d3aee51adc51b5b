#pragma once
// The int8 products of the block types on AVX-512 VNNI (isa/matmul_q8.cpp): many rows on
// strips of 16 weight rows, a few on the rows as stored (pairs), Q4_K's few rows as words,
// packed or not, and Q6_K's, Q4_0's and Q4_1's few on their packed tiles as one strip.
// Include it after int8_product.hpp, inside the ORZO_TARGET_BEGIN region.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "core/quant_blocks.hpp"
#include "core/tensor.hpp"
#include "kernels/cpu/isa/int8_product.hpp"
#include "kernels/cpu/packed_rows.hpp"

#if defined(ORZO_Q8_VNNI)

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): internal linkage, as target.hpp explains

// Weight rows meet activation rows as in a GEMM's register tile: the 16 lanes of a vector
// are 16 weight rows (a strip), and each vpdpbusd multiplies four codes of every row by
// the same four activation codes, broadcast. A block's 32 codes take eight of them,
// summed exactly in int32 lane by lane, and then one f32 scaling a row and block: per 512
// products, four vector operations beside the eight vpdpbusd, and no horizontal sum at
// the end. (Lanes along k, as on AVX2, cost a scaling per four vpdpbusd and a reduction
// per output, and reached 21 % of this CPU's int8 dot-product rate at m = 512.)
constexpr int kStripRows = 16;

// One 32-weight block of a quantized activation row, its codes in the weights' order, in
// one int8 digit or two: x = scale * (256 * q[0] + q[1]) for two, where q[1] rounds what
// q[0] left (at most half a step of amax / 127) in 256ths of that step. The sums come per
// half, for the formats whose halves scale apart, and for the block.
template <int Digits>
struct alignas(64) ActivationBlock {
  static constexpr int kDigits = Digits;
  static int64_t units(int64_t k) { return k / 32; }
  int8_t q[Digits][32];
  float scale;            // amax / 127, over 256 for two digits
  int32_t correction[3];  // -bias * (the codes' value in steps of scale): half 0, half 1, the block
  float scaled_sum[3];    // scale * that value, likewise, for the offsets
};
static_assert(sizeof(ActivationBlock<1>) == 64);
template <int Digits>
using ActivationOf = ActivationBlock<Digits>;

// One 32-float block of x rounded: each half's codes in int32 lanes, digit by digit, and its
// value in steps of `scale` (256 * q[0] + q[1] for two digits). Rounds to nearest (even on
// ties, the default MXCSR mode); a block of zeros has scale 0. A second digit of +128 (a
// remainder of exactly half a step) saturates to 127.
template <int Digits>
struct RoundedBlock {
  __m512i q[Digits][2];
  __m512i value[2];
  float scale;
};

template <int Digits>
inline RoundedBlock<Digits> round_block(const float* x) {
  const __m512 v[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};
  const float top = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_abs_ps(v[1])));
  const float d = top / 127.0f;
  const __m512 inv = _mm512_set1_ps(top > 0.0f ? 127.0f / top : 0.0f);
  RoundedBlock<Digits> out;
  for (int h = 0; h < 2; ++h) {
    const __m512 steps = _mm512_mul_ps(v[h], inv);
    out.q[0][h] = out.value[h] = _mm512_cvtps_epi32(steps);
    if constexpr (Digits == 2) {
      const __m512 left = _mm512_sub_ps(steps, _mm512_cvtepi32_ps(out.q[0][h]));
      out.q[1][h] = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(left, _mm512_set1_ps(256.0f))), _mm512_set1_epi32(127));
      out.value[h] = _mm512_add_epi32(_mm512_slli_epi32(out.q[0][h], 8), out.q[1][h]);
    }
  }
  out.scale = Digits == 2 ? d / 256.0f : d;
  return out;
}

// Each digit's 32 codes in one store, which the pairs' 32-byte copies of them (below) are
// forwarded from; two 16-byte stores would stall those loads until they retire.
template <int Digits>
void quantize_row(const float* x, int64_t k, int bias, ActivationBlock<Digits>* out) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const RoundedBlock<Digits> r = round_block<Digits>(x + 32 * b);
    ActivationBlock<Digits>& o = out[b];
    for (int g = 0; g < Digits; ++g)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.q[g]),
                          _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtsepi32_epi8(r.q[g][0])),
                                                  _mm512_cvtsepi32_epi8(r.q[g][1]), 1));
    int sums[3];
    sums[0] = _mm512_reduce_add_epi32(r.value[0]);
    sums[2] = _mm512_reduce_add_epi32(_mm512_add_epi32(r.value[0], r.value[1]));
    sums[1] = sums[2] - sums[0];
    o.scale = r.scale;
    for (int s = 0; s < 3; ++s) {
      o.correction[s] = -bias * sums[s];
      o.scaled_sum[s] = o.scale * static_cast<float>(sums[s]);
    }
  }
}

// One 32-weight block of a strip of weight rows.
template <int Halves>
struct StripBlock {
  __m512i q[8];  // lane j of q[t]: codes 4t .. 4t + 3 of row j, made unsigned by kBias
  alignas(64) float d[Halves][kStripRows], m[Halves][kStripRows];
};
template <class F>
constexpr int kHalvesOf = kScalesPerHalf<F> ? 2 : 1;
template <class F>
using StripOf = StripBlock<kHalvesOf<F>>;

// out[t], lane j = dword t of rows[j]. Each 256-bit half transposes eight rows; the low
// halves take rows 0-3 and 8-11, the high ones 4-7 and 12-15, so that the last step's
// 128-bit lanes come out in row order.
inline void transpose_strip(const __m256i* rows, __m512i* out) {
  __m512i z[8], t[8], u[8];
  for (int p = 0; p < 8; ++p) {
    const int low = p < 4 ? p : p + 4;
    z[p] = _mm512_inserti64x4(_mm512_castsi256_si512(rows[low]), rows[low + 4], 1);
  }
  for (int p = 0; p < 8; p += 2) {
    t[p] = _mm512_unpacklo_epi32(z[p], z[p + 1]);
    t[p + 1] = _mm512_unpackhi_epi32(z[p], z[p + 1]);
  }
  for (int p = 0; p < 8; p += 4) {
    u[p] = _mm512_unpacklo_epi64(t[p], t[p + 2]);
    u[p + 1] = _mm512_unpackhi_epi64(t[p], t[p + 2]);
    u[p + 2] = _mm512_unpacklo_epi64(t[p + 1], t[p + 3]);
    u[p + 3] = _mm512_unpackhi_epi64(t[p + 1], t[p + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    out[c] = _mm512_shuffle_i32x4(u[c], u[c + 4], 0x88);
    out[c + 4] = _mm512_shuffle_i32x4(u[c], u[c + 4], 0xdd);
  }
}

// A super-block's d and m for the strip's rows, through the transpose of the codes: part p
// of the unpacked Scales is half p % kHalves of sub-block p / kHalves.
template <class F>
void strip_scales(const uint8_t* unit, size_t row_bytes, int rows, StripOf<F>* out) {
  constexpr int kHalves = kHalvesOf<F>, kParts = F::kSubs * kHalves;
  static_assert(sizeof(F::Scales::d) == kParts * sizeof(float), "one part per sub-block and half");
  __m256i d[kParts / 8][kStripRows], m[kParts / 8][kStripRows];
  for (int j = 0; j < kStripRows; ++j) {
    const typename F::Scales scales = j < rows ? F::scales(unit + j * row_bytes) : typename F::Scales{};
    for (int c = 0; c < kParts / 8; ++c) {
      d[c][j] = _mm256_castps_si256(_mm256_loadu_ps(scales.d + 8 * c));
      m[c][j] = _mm256_castps_si256(_mm256_loadu_ps(scales.m + 8 * c));
    }
  }
  for (int c = 0; c < kParts / 8; ++c) {
    __m512i t[8];
    transpose_strip(d[c], t);
    for (int p = 0; p < 8; ++p) _mm512_store_si512(out[(8 * c + p) / kHalves].d[(8 * c + p) % kHalves], t[p]);
    if constexpr (F::kHasMin) {
      transpose_strip(m[c], t);
      for (int p = 0; p < 8; ++p) _mm512_store_si512(out[(8 * c + p) / kHalves].m[(8 * c + p) % kHalves], t[p]);
    }
  }
}

// The `rows` (<= 16) weight rows at w, row_bytes apart, into k / 32 strip blocks. Rows
// past `rows` get zero scales, so any codes do for them. `ahead` (or null) is the next
// strip, fetched into cache meanwhile: the hardware prefetchers do not run far enough
// ahead of a decode this short to hide the memory's latency.
template <class F>
void decode_strip(const uint8_t* w, size_t row_bytes, int rows, int64_t k, const uint8_t* ahead, StripOf<F>* out) {
  constexpr int kHalves = kHalvesOf<F>;
  const int64_t units = k / F::kStep;
  for (int64_t u = 0; u < units; ++u) {
    const size_t at = static_cast<size_t>(u * F::kStepBytes);
    if (ahead)
      for (int j = 0; j < kStripRows; ++j) prefetch(ahead + j * row_bytes + at, F::kStepBytes);
    for (int s = 0; s < F::kSubs; ++s) {
      StripOf<F>& o = out[u * F::kSubs + s];
      __m256i codes[kStripRows];
      for (int j = 0; j < kStripRows; ++j) {
        if (j >= rows) {
          codes[j] = _mm256_setzero_si256();
          if constexpr (!kUnitScales<F>)
            for (int h = 0; h < kHalves; ++h) o.d[h][j] = o.m[h][j] = 0.0f;
          continue;
        }
        const Codes c = F::codes(w + j * row_bytes + at, s);
        codes[j] = c.q;
        if constexpr (!kUnitScales<F>)
          for (int h = 0; h < kHalves; ++h) {
            o.d[h][j] = c.d[h];
            o.m[h][j] = F::kHasMin ? c.m[h] : 0.0f;
          }
      }
      transpose_strip(codes, o.q);
      for (auto& q : o.q) q = _mm512_add_epi8(q, _mm512_set1_epi8(static_cast<char>(F::kBias)));
    }
    if constexpr (kUnitScales<F>) strip_scales<F>(w + at, row_bytes, rows, out + u * F::kSubs);
  }
}

inline __m512i broadcast_codes(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, sizeof v);
  return _mm512_set1_epi32(v);
}

// out[s][i] (+)= the products of strip s with activation row i, 16 weight rows a vector.
// Each (row, activation row) runs the same operations in the same order whatever S and M
// are, which is the batch invariance.
template <class F, int Digits, int S, int M>
void strip_tile(const StripOf<F>* w, int64_t blocks, const ActivationBlock<Digits>* x, __m512 (&out)[S][M]) {
  constexpr int kHalves = kHalvesOf<F>, kQuads = 8 / kHalves;
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < M; ++i) out[s][i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
#pragma GCC unroll 2
    for (int h = 0; h < kHalves; ++h) {
      const int sum = kHalves == 1 ? 2 : h;
      // Each digit sums in accumulators of its own, so a weight vector loaded once meets
      // both and twice as many vpdpbusd chains hide each other's latency. The bias's
      // correction starts the sum of the last digit, after which the first is shifted in.
      __m512i acc[Digits][S][M];
      for (int i = 0; i < M; ++i) {
        const __m512i correction =
            kActivationBias<F> != 0 ? _mm512_set1_epi32(x[i * blocks + b].correction[sum]) : _mm512_setzero_si512();
        for (int s = 0; s < S; ++s)
          for (int digit = 0; digit < Digits; ++digit) acc[digit][s][i] = digit == Digits - 1 ? correction : _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int t = h * kQuads; t < (h + 1) * kQuads; ++t) {
        __m512i wq[S];
        for (int s = 0; s < S; ++s) wq[s] = _mm512_load_si512(&w[s * blocks + b].q[t]);
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i)
#pragma GCC unroll 2
          for (int digit = 0; digit < Digits; ++digit) {
            const __m512i xq = broadcast_codes(x[i * blocks + b].q[digit] + 4 * t);
            for (int s = 0; s < S; ++s) acc[digit][s][i] = _mm512_dpbusd_epi32(acc[digit][s][i], wq[s], xq);
          }
      }
      if constexpr (Digits == 2)
        for (int s = 0; s < S; ++s)
          for (int i = 0; i < M; ++i) acc[1][s][i] = _mm512_add_epi32(_mm512_slli_epi32(acc[0][s][i], 8), acc[1][s][i]);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) {
        const ActivationBlock<Digits>& a = x[i * blocks + b];
        const __m512 scale = _mm512_set1_ps(a.scale);
        for (int s = 0; s < S; ++s) {
          const StripOf<F>& ws = w[s * blocks + b];
          out[s][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[Digits - 1][s][i]), _mm512_mul_ps(_mm512_load_ps(ws.d[h]), scale),
                                      out[s][i]);
          if constexpr (F::kHasMin)
            out[s][i] = _mm512_fmadd_ps(_mm512_load_ps(ws.m[h]), _mm512_set1_ps(a.scaled_sum[sum]), out[s][i]);
        }
      }
    }
  }
}

// Strips decoded together: their codes (1.25 to 1.5 bytes a weight) stay in L2 while every
// activation row passes over them, and each weight row is decoded once per call.
constexpr int kPanelStrips = 2;
constexpr int kTileCols = 4;

template <class F, int Digits, int S, int M>
void strips_into(const Job<ActivationOf<Digits>>& job, const StripOf<F>* panel, int64_t j, int64_t i0) {
  __m512 out[S][M];
  strip_tile<F, Digits, S, M>(panel, job.units, job.x + i0 * job.units, out);
  for (int s = 0; s < S; ++s) {
    const int64_t at = j + kStripRows * s, rows = std::min<int64_t>(kStripRows, job.n - at);
    const __mmask16 mask = static_cast<__mmask16>(rows == kStripRows ? 0xffffu : (1u << rows) - 1);
    const __m512 bias = job.bias ? _mm512_maskz_loadu_ps(mask, job.bias + at) : _mm512_setzero_ps();
    for (int i = 0; i < M; ++i) _mm512_mask_storeu_ps(job.y + (i0 + i) * job.n + at, mask, _mm512_add_ps(out[s][i], bias));
  }
}

template <class F, int Digits, int S>
void strips_cols(const Job<ActivationOf<Digits>>& job, const StripOf<F>* panel, int64_t j, int64_t i0, int64_t cols) {
  static_assert(kTileCols == 4, "one case per tile width");
  switch (cols) {
    case 4: strips_into<F, Digits, S, 4>(job, panel, j, i0); break;
    case 3: strips_into<F, Digits, S, 3>(job, panel, j, i0); break;
    case 2: strips_into<F, Digits, S, 2>(job, panel, j, i0); break;
    default: strips_into<F, Digits, S, 1>(job, panel, j, i0); break;
  }
}

// A packed tile's (packed_rows.hpp) 16 rows of an f16 scale, or of a byte scale, as f32 lanes.
inline __m512 rows_f16(const uint16_t* p) { return _mm512_cvtph_ps(load256(reinterpret_cast<const uint8_t*>(p))); }
inline __m512 rows_u8(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// Lane r: bytes 2r, 2r + 1 of a, then of b: four consecutive codes of row r from two of a
// packed tile's pair vectors. The unpacks take rows 0-3 and 8-11 from the low words, 4-7
// and 12-15 from the high ones; the shuffle puts them in order.
inline __m512i interleave_rows(const uint8_t* a, const uint8_t* b) {
  const __m256i x = load256(a), y = load256(b);
  const __m512i rows = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_unpacklo_epi16(x, y)), _mm256_unpackhi_epi16(x, y), 1);
  return _mm512_shuffle_i32x4(rows, rows, _MM_SHUFFLE(3, 1, 2, 0));
}

// 16 rows packed side by side into k / 32 strip blocks, the same codes and scales as
// decode_strip's from the rows as stored (the scales are the same products), with no
// transpose: a block's codes are two of a tile's pair vectors interleaved by words.
inline void decode_packed_strip(const PackedQ4_KTile* tiles, int64_t units, StripOf<Q4_KFormat>* out) {
  static_assert(kPackedRows == kStripRows && Q4_KFormat::kBias == 0);
  for (int64_t u = 0; u < units; ++u) {
    const PackedQ4_KTile& t = tiles[u];
    prefetch_tile(tiles, u);
    StripOf<Q4_KFormat>* o = out + 8 * u;
    const __m512 d = rows_f16(t.d), dmin = rows_f16(t.dmin);
    for (int s = 0; s < 8; ++s) {
      _mm512_store_ps(o[s].d[0], _mm512_mul_ps(d, rows_u8(t.sc[s])));
      _mm512_store_ps(o[s].m[0], _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), dmin), rows_u8(t.mn[s])));
    }
    for (int p = 0; p < 4; ++p)
      for (int q = 0; q < 8; ++q) {
        const __m512i codes = interleave_rows(t.codes[p][2 * q], t.codes[p][2 * q + 1]);
        o[2 * p].q[q] = _mm512_and_si512(codes, _mm512_set1_epi8(0x0f));
        o[2 * p + 1].q[q] = _mm512_and_si512(_mm512_srli_epi16(codes, 4), _mm512_set1_epi8(0x0f));
      }
  }
}

inline __m512 rows_i8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// A packed Q6_K tile's codes (q + 32) of blocks 2p and 2p + 1 at weights 8h .. 8h + 7 of
// each, as a strip holds them: out[c][v] is block 2p + c's weights 8h + 4v .. 8h + 4v + 3,
// a lane a row. The 16-bit shifts move each bit pair of `high` to bits 4-5 of its byte;
// the bits they carry in from the neighbouring byte fall outside the masks.
inline void q6_k_codes(const PackedQ6_KTile& t, int p, int h, __m512i (&out)[2][2]) {
  const __m512i low[2] = {_mm512_loadu_si512(t.low[p][2 * h]), _mm512_loadu_si512(t.low[p][2 * h + 1])};
  const __m512i high = _mm512_loadu_si512(t.high[p][h]);
  const __m512i nibble = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30);
  const __m512i tops[2][2] = {{_mm512_slli_epi16(high, 4), high}, {_mm512_slli_epi16(high, 2), _mm512_srli_epi16(high, 2)}};
  constexpr int kOrAnd = 0xf8;  // a | (b & c)
  for (int v = 0; v < 2; ++v) {
    out[0][v] = _mm512_ternarylogic_epi32(_mm512_and_si512(low[v], nibble), tops[0][v], top, kOrAnd);
    out[1][v] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(low[v], 4), nibble), tops[1][v], top, kOrAnd);
  }
}

// The row scales of a packed Q6_K tile's 16 weights s (16s .. 16s + 15): the products d * sc
// that Q6_KFormat::scales makes of the rows as stored.
inline __m512 q6_k_scales(const PackedQ6_KTile& t, __m512 d, int s) { return _mm512_mul_ps(d, rows_i8(t.sc[s])); }

// decode_packed_strip's Q6_K: no transpose either, the tile's planes merged.
inline void decode_packed_strip(const PackedQ6_KTile* tiles, int64_t units, StripOf<Q6_KFormat>* out) {
  static_assert(kPackedRows == kStripRows && Q6_KFormat::kBias == 32 && !Q6_KFormat::kHasMin, "codes as stored, no offsets");
  for (int64_t u = 0; u < units; ++u) {
    const PackedQ6_KTile& t = tiles[u];
    prefetch_tile(tiles, u);
    StripOf<Q6_KFormat>* o = out + 8 * u;
    const __m512 d = rows_f16(t.d);
    for (int b = 0; b < 8; ++b)
      for (int h = 0; h < 2; ++h) _mm512_store_ps(o[b].d[h], q6_k_scales(t, d, 2 * b + h));
    for (int p = 0; p < 4; ++p)
      for (int h = 0; h < 4; ++h) {
        __m512i codes[2][2];
        q6_k_codes(t, p, h, codes);
        for (int c = 0; c < 2; ++c)
          for (int v = 0; v < 2; ++v) o[2 * p + c].q[2 * h + v] = codes[c][v];
      }
  }
}

// A packed Q4_0 or Q4_1 tile's codes of weights 4g .. 4g + 3 (out[0]) and 16 + 4g .. 16 + 4g
// + 3 (out[1]) from its codes[g], a lane a row, as a strip holds them.
inline void nibble_codes(const uint8_t* codes, __m512i (&out)[2]) {
  const __m512i v = _mm512_loadu_si512(codes), nibble = _mm512_set1_epi8(0x0f);
  out[0] = _mm512_and_si512(v, nibble);
  out[1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
}

template <class Tile>
constexpr bool kTileHasMin = std::is_same_v<Tile, PackedQ4_1Tile>;

// decode_packed_strip's Q4_0 and Q4_1: the rows' d (and m) as decode_strip takes them from
// each block, the nibbles split.
template <class Tile>
void decode_packed_nibble_strip(const Tile* tiles, int64_t units, StripBlock<1>* out) {
  for (int64_t u = 0; u < units; ++u) {
    const Tile& t = tiles[u];
    prefetch_tile(tiles, u);
    StripBlock<1>& o = out[u];
    _mm512_store_ps(o.d[0], rows_f16(t.d));
    if constexpr (kTileHasMin<Tile>) _mm512_store_ps(o.m[0], rows_f16(t.m));
    for (int g = 0; g < 4; ++g) {
      __m512i codes[2];
      nibble_codes(t.codes[g], codes);
      o.q[g] = codes[0];
      o.q[4 + g] = codes[1];
    }
  }
}
inline void decode_packed_strip(const PackedQ4_0Tile* tiles, int64_t units, StripOf<Q4_0Format>* out) {
  static_assert(Q4_0Format::kBias == 8 && !Q4_0Format::kHasMin, "the raw nibbles are q + 8");
  decode_packed_nibble_strip(tiles, units, out);
}
inline void decode_packed_strip(const PackedQ4_1Tile* tiles, int64_t units, StripOf<Q4_1Format>* out) {
  static_assert(Q4_1Format::kBias == 0 && Q4_1Format::kHasMin, "the raw nibbles, and the offsets m");
  decode_packed_nibble_strip(tiles, units, out);
}

// The formats whose rows a level packs, and their tiles: named through decltype, never
// called.
struct PackedTiles {
  static PackedQ4_KTile of(Q4_KFormat);
  static PackedQ6_KTile of(Q6_KFormat);
  static PackedQ4_0Tile of(Q4_0Format);
  static PackedQ4_1Tile of(Q4_1Format);
  static void of(...);
};
template <class F>
using PackedTileOf = decltype(PackedTiles::of(std::declval<F>()));

template <class F, int Digits>
void rows_range(const Job<ActivationOf<Digits>>& job, int64_t begin, int64_t end) {
  thread_local std::vector<StripOf<F>> scratch;
  scratch.resize(std::max(scratch.size(), static_cast<size_t>(kPanelStrips * job.units)));
  for (int64_t j = begin; j < end; j += kPanelStrips * kStripRows) {
    const int strips = static_cast<int>(std::min<int64_t>(kPanelStrips, (end - j + kStripRows - 1) / kStripRows));
    for (int s = 0; s < strips; ++s) {
      const int64_t first = j + kStripRows * s;
      const int rows = static_cast<int>(std::min<int64_t>(kStripRows, end - first));
      if constexpr (!std::is_void_v<PackedTileOf<F>>)
        if (job.packed) {
          const int64_t units = job.k / F::kStep;
          decode_packed_strip(static_cast<const PackedTileOf<F>*>(job.packed) + first / kStripRows * units, units,
                              scratch.data() + s * job.units);
          continue;
        }
      const uint8_t* strip = job.w + first * job.row_bytes;
      const uint8_t* ahead = first + 2 * kStripRows <= end ? strip + kStripRows * job.row_bytes : nullptr;
      decode_strip<F>(strip, job.row_bytes, rows, job.k, ahead, scratch.data() + s * job.units);
    }
    for (int64_t i0 = 0; i0 < job.m; i0 += kTileCols) {
      const int64_t cols = std::min<int64_t>(kTileCols, job.m - i0);
      if (strips == 2)
        strips_cols<F, Digits, 2>(job, scratch.data(), j, i0, cols);
      else
        strips_cols<F, Digits, 1>(job, scratch.data(), j, i0, cols);
    }
  }
}

// A few activation rows (decode) meet each weight row as stored, lanes along k: a vector
// holds two sub-blocks' 64 codes in their stored order, lane l codes 4l .. 4l + 3 of
// sub-block l / 8, so decoding costs no transpose (a strip's costs as much as the products
// when only one activation row shares it). Each lane scales its own four products, so a
// pair costs the vpdpbusd of each digit and an f32 scaling per activation row, and the 16
// lanes are summed once at the end of a row. The sums run in another order than a strip's:
// the two layouts agree to f32 rounding, not bit for bit.
template <int Digits>
struct alignas(64) ActivationPair {
  static constexpr int kDigits = Digits;
  static int64_t units(int64_t k) { return (k / 32 + 1) / 2; }
  int8_t q[Digits][64];   // blocks 2p and 2p + 1, as ActivationBlock's
  float scale[16];        // lane l: block l / 8's scale
  int32_t correction[16]; // lanes 0, 4, 8 and 12: their half's correction (ActivationBlock); the rest 0
  float scaled_sum[16];   // likewise, its scaled_sum
};

template <int Digits>
void quantize_row(const float* x, int64_t k, int bias, ActivationPair<Digits>* out) {
  thread_local std::vector<ActivationBlock<Digits>> blocks;
  const int64_t count = k / 32;
  blocks.resize(std::max(blocks.size(), static_cast<size_t>(count)));
  quantize_row(x, k, bias, blocks.data());
  for (int64_t p = 0; 2 * p < count; ++p) {
    ActivationPair<Digits>& o = out[p];
    o = ActivationPair<Digits>{};
    for (int64_t b = 0; b < 2 && 2 * p + b < count; ++b) {
      const ActivationBlock<Digits>& a = blocks[static_cast<size_t>(2 * p + b)];
      for (int d = 0; d < Digits; ++d) std::memcpy(o.q[d] + 32 * b, a.q[d], 32);
      std::fill_n(o.scale + 8 * b, 8, a.scale);
      for (int h = 0; h < 2; ++h) {
        o.correction[8 * b + 4 * h] = a.correction[h];
        o.scaled_sum[8 * b + 4 * h] = a.scaled_sum[h];
      }
    }
  }
}

// A pair of a weight row: unsigned codes (q + kBias), and each lane's d and m.
struct PairCodes {
  __m512i q;
  __m512 d, m;
};

// Lanes 4h .. 4h + 3 hold the codes of half h % 2 of the pair's sub-block h / 2: each takes
// its entry parts[h] of `values`.
inline __m512 spread(__m512 values, const int (&parts)[4]) {
  const __m512i at = _mm512_setr_epi32(parts[0], parts[0], parts[0], parts[0], parts[1], parts[1], parts[1], parts[1],
                                       parts[2], parts[2], parts[2], parts[2], parts[3], parts[3], parts[3], parts[3]);
  return _mm512_permutexvar_ps(at, values);
}

template <class F, class = void>
constexpr bool kPairCodes = false;
template <class F>
constexpr bool kPairCodes<F, decltype(static_cast<void>(F::pair_codes(nullptr, 0)))> = true;

inline __m512i unsigned_pair(__m256i first, __m256i second, int bias) {
  return _mm512_add_epi8(_mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1), _mm512_set1_epi8(static_cast<char>(bias)));
}

// Pair p of a super-block whose Scales give every sub-block's d and m.
template <class F>
PairCodes unit_pair(const uint8_t* unit, int p, __m512 d, __m512 m) {
  constexpr int kHalves = kHalvesOf<F>;
  __m512i q;
  if constexpr (kPairCodes<F>)
    q = F::pair_codes(unit, p);
  else
    q = unsigned_pair(F::codes(unit, 2 * p).q, F::codes(unit, 2 * p + 1).q, F::kBias);
  // Part (sub-block s, half h) of Scales is s * kHalves + h.
  const int s = 2 * p * kHalves, t = (2 * p + 1) * kHalves;
  const int parts[4] = {s, s + kHalves - 1, t, t + kHalves - 1};
  return {q, spread(d, parts), F::kHasMin ? spread(m, parts) : _mm512_setzero_ps()};
}

// Sub-blocks a and (where `second`) b, through codes(): formats without Scales.
template <class F>
PairCodes coded_pair(const uint8_t* unit_a, int a, const uint8_t* unit_b, int b, bool second) {
  const Codes first = F::codes(unit_a, a);
  const Codes other = second ? F::codes(unit_b, b) : Codes{_mm256_setzero_si256(), {0, 0}, {0, 0}};
  const __m512 d = _mm512_castps128_ps512(_mm_setr_ps(first.d[0], first.d[1], other.d[0], other.d[1]));
  const __m512 m = _mm512_castps128_ps512(_mm_setr_ps(first.m[0], first.m[1], other.m[0], other.m[1]));
  constexpr int kParts[4] = {0, 1, 2, 3};
  return {unsigned_pair(first.q, other.q, F::kBias), spread(d, kParts), F::kHasMin ? spread(m, kParts) : _mm512_setzero_ps()};
}

template <class F, class = void>
constexpr bool kBlockPairCodes = false;
template <class F>
constexpr bool kBlockPairCodes<F, decltype(static_cast<void>(F::block_pair_codes(nullptr, nullptr)))> = true;

// Blocks a and b of a format with 32-weight blocks: through the format's block_pair_codes
// where it has them (the common types: a codes() and a scalar scale a block cost as much
// as the products), else codes().
template <class F>
PairCodes block_pair(const uint8_t* a, const uint8_t* b) {
  if constexpr (kBlockPairCodes<F>) {
    const __m512 scales = _mm512_castps128_ps512(F::block_pair_scales(a, b));
    constexpr int kD[4] = {0, 0, 2, 2}, kM[4] = {1, 1, 3, 3};
    return {F::block_pair_codes(a, b), spread(scales, kD), F::kHasMin ? spread(scales, kM) : _mm512_setzero_ps()};
  } else {
    return coded_pair<F>(a, 0, b, 0, true);
  }
}

// acc[r][i] += pair g of weight row r times pair g of activation row i.
template <class F, int Digits, int R, int M>
inline void pair_step(const PairCodes (&w)[R], const ActivationPair<Digits>* x, int64_t pairs, int64_t g, __m512 (&acc)[R][M]) {
  constexpr bool kCorrect = kActivationBias<F> != 0;
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    const ActivationPair<Digits>& a = x[i * pairs + g];
    const __m512i correction = kCorrect ? _mm512_load_si512(a.correction) : _mm512_setzero_si512();
    const __m512 scale = _mm512_load_ps(a.scale);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      __m512i sum = _mm512_dpbusd_epi32(Digits == 1 ? correction : _mm512_setzero_si512(), w[r].q, _mm512_load_si512(a.q[0]));
      if constexpr (Digits == 2)
        sum = _mm512_add_epi32(_mm512_slli_epi32(sum, 8), _mm512_dpbusd_epi32(correction, w[r].q, _mm512_load_si512(a.q[1])));
      acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(w[r].d, scale), acc[r][i]);
      if constexpr (F::kHasMin) acc[r][i] = _mm512_fmadd_ps(w[r].m, _mm512_load_ps(a.scaled_sum), acc[r][i]);
    }
  }
}

// out[r][i] = dot(weight row r, activation row i) for R rows at w; `next` (or null) is the
// next R rows, fetched into cache meanwhile.
template <class F, int Digits, int R, int M>
void pair_tile(const uint8_t* w, size_t row_bytes, int64_t k, const ActivationPair<Digits>* x, const uint8_t* next,
               float (&out)[R][M]) {
  __m512 acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) acc[r][i] = _mm512_setzero_ps();
  const int64_t units = k / F::kStep, pairs = ActivationPair<Digits>::units(k);
  const auto fetch = [&](int64_t from, int64_t bytes) {
    if (next)
      for (int r = 0; r < R; ++r) prefetch(next + r * row_bytes + from, bytes);
  };
  if constexpr (F::kSubs >= 2) {
    static_assert(F::kSubs % 2 == 0, "a super-block is whole pairs");
    for (int64_t u = 0; u < units; ++u) {
      const size_t at = static_cast<size_t>(u * F::kStepBytes);
      fetch(static_cast<int64_t>(at), F::kStepBytes);
      __m512 d[R], m[R];
      if constexpr (kUnitScales<F>)
        for (int r = 0; r < R; ++r) {
          const typename F::Scales scales = F::scales(w + r * row_bytes + at);
          constexpr bool kWide = sizeof(scales.d) >= 64;
          d[r] = kWide ? _mm512_loadu_ps(scales.d) : _mm512_castps256_ps512(_mm256_loadu_ps(scales.d));
          m[r] = kWide ? _mm512_loadu_ps(scales.m) : _mm512_castps256_ps512(_mm256_loadu_ps(scales.m));
        }
#pragma GCC unroll 8
      for (int p = 0; p < F::kSubs / 2; ++p) {
        PairCodes pair[R];
        for (int r = 0; r < R; ++r) {
          const uint8_t* unit = w + r * row_bytes + at;
          if constexpr (kUnitScales<F>)
            pair[r] = unit_pair<F>(unit, p, d[r], m[r]);
          else
            pair[r] = coded_pair<F>(unit, 2 * p, unit, 2 * p + 1, true);
        }
        pair_step<F, Digits, R, M>(pair, x, pairs, u * (F::kSubs / 2) + p, acc);
      }
    }
  } else {
    for (int64_t g = 0; g < pairs; ++g) {
      const size_t at = static_cast<size_t>(2 * g * F::kStepBytes);
      const bool second = 2 * g + 1 < units;
      fetch(static_cast<int64_t>(at), (second ? 2 : 1) * F::kStepBytes);
      PairCodes pair[R];
      for (int r = 0; r < R; ++r) {
        const uint8_t* unit = w + r * row_bytes + at;
        pair[r] = second ? block_pair<F>(unit, unit + F::kStepBytes) : coded_pair<F>(unit, 0, unit, 0, false);
      }
      pair_step<F, Digits, R, M>(pair, x, pairs, g, acc);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) out[r][i] = _mm512_reduce_add_ps(acc[r][i]);
}

constexpr int kPairRows = 4;

template <class F, int Digits, int R, int M>
void pair_rows_into(const Job<ActivationPair<Digits>>& job, int64_t j, int64_t end) {
  float out[R][M];
  const uint8_t* rows = job.w + j * job.row_bytes;
  const uint8_t* next = j + 2 * R <= end ? rows + R * job.row_bytes : nullptr;
  pair_tile<F, Digits, R, M>(rows, job.row_bytes, job.k, job.x, next, out);
  for (int r = 0; r < R; ++r) {
    const float b = job.bias ? job.bias[j + r] : 0.0f;
    for (int i = 0; i < M; ++i) job.y[i * job.n + j + r] = out[r][i] + b;
  }
}

template <class F, int Digits, int M>
void gemv_rows(const Job<ActivationPair<Digits>>& job, int64_t begin, int64_t end) {
  int64_t j = begin;
  for (; j + kPairRows <= end; j += kPairRows) pair_rows_into<F, Digits, kPairRows, M>(job, j, end);
  for (; j < end; ++j) pair_rows_into<F, Digits, 1, M>(job, j, end);
}

template <int Digits>
using GemvActivationOf = ActivationPair<Digits>;

// Q4_K's gemv, on words. Two int8 digits are one 16-bit integer, 256 * q[0] + q[1] (at
// most 32,639 in size), so decode can meet its activations as words: vpdpwssd multiplies
// 32 of them by one sub-block's 32 codes widened to words, the sums as exact as the
// digits'. A vector is then one sub-block, two codes a lane, scaled by one number
// broadcast (no permute spreading scales over a pair's lanes), and the sub-blocks' offsets
// m meet the activation sums once per super-block, in one FMA. On a Zen 4 (matmul_bench
// q8/gemv, alternating with the pairs) it ran 1.1-1.2x at one row and 1.05-1.09x at two.
// Q6_K, whose halves scale apart (two scales a vector), ran 0.6-0.7x and keeps the pairs.
inline void quantize_words(const float* x, int64_t begin, int64_t end, int64_t k, WordRows& out) {
  const size_t count = static_cast<size_t>(k / 32);
  for (int64_t i = begin; i < end; ++i)
    for (size_t b = 0; b < count; ++b) {
      const RoundedBlock<2> r = round_block<2>(x + i * k + 32 * static_cast<int64_t>(b));
      int16_t* q = out.q.data() + i * k + 32 * static_cast<int64_t>(b);
      for (int h = 0; h < 2; ++h) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16 * h), _mm512_cvtepi32_epi16(r.value[h]));
      out.scale[static_cast<size_t>(i) * count + b] = r.scale;
      out.sum[static_cast<size_t>(i) * count + b] =
          r.scale * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(r.value[0], r.value[1])));
    }
}

// out[r][i] = dot(weight row r, activation row i) for R rows at w, as pair_tile.
template <class F, int R, int M>
void word_tile(const uint8_t* w, size_t row_bytes, const WordRows& x, const uint8_t* next, float (&out)[R][M]) {
  static_assert(F::kSubs == 8 && !kScalesPerHalf<F>, "a super-block of eight sub-blocks, one scale each");
  const int64_t k = x.k, blocks = k / 32;
  __m256 offsets[R][M];
  __m512 acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) offsets[r][i] = _mm256_setzero_ps(), acc[r][i] = _mm512_setzero_ps();
  for (int64_t u = 0; u < k / F::kStep; ++u) {
    const size_t at = static_cast<size_t>(u * F::kStepBytes);
    if (next)
      for (int r = 0; r < R; ++r) prefetch(next + r * row_bytes + at, F::kStepBytes);
    // Loads as wide as Scales' stores: a wider one, even masked, is not forwarded from
    // them (on a Zen 4 that stalled this loop to half its speed).
    alignas(32) float scale[R][M][8];
    for (int r = 0; r < R; ++r) {
      const typename F::Scales s = F::scales(w + r * row_bytes + at);
      for (int i = 0; i < M; ++i) {
        const int64_t first = i * blocks + 8 * u;
        _mm256_store_ps(scale[r][i], _mm256_mul_ps(_mm256_load_ps(s.d), _mm256_loadu_ps(x.scale.data() + first)));
        offsets[r][i] = _mm256_fmadd_ps(_mm256_load_ps(s.m), _mm256_loadu_ps(x.sum.data() + first), offsets[r][i]);
      }
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m512i codes[R][2];
      for (int r = 0; r < R; ++r) F::pair_words(w + r * row_bytes + at, p, codes[r][0], codes[r][1]);
      for (int i = 0; i < M; ++i) {
        const int16_t* xq = x.q.data() + i * k + u * F::kStep + 64 * p;
        const __m512i xs[2] = {_mm512_loadu_si512(xq), _mm512_loadu_si512(xq + 32)};
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < 2; ++h) {
            const __m512 sum = _mm512_cvtepi32_ps(_mm512_dpwssd_epi32(_mm512_setzero_si512(), codes[r][h], xs[h]));
            acc[r][i] = _mm512_fmadd_ps(sum, _mm512_set1_ps(scale[r][i][2 * p + h]), acc[r][i]);
          }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i)
      out[r][i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][i], _mm512_zextps256_ps512(offsets[r][i])));
}

template <class F, int R, int M>
void word_rows_into(const Job<WordRows>& job, int64_t j, int64_t end) {
  float out[R][M];
  const uint8_t* rows = job.w + j * job.row_bytes;
  const uint8_t* next = j + 2 * R <= end ? rows + R * job.row_bytes : nullptr;
  word_tile<F, R, M>(rows, job.row_bytes, *job.x, next, out);
  for (int r = 0; r < R; ++r) {
    const float b = job.bias ? job.bias[j + r] : 0.0f;
    for (int i = 0; i < M; ++i) job.y[i * job.n + j + r] = out[r][i] + b;
  }
}

template <class F, int M>
void word_rows(const Job<WordRows>& job, int64_t begin, int64_t end) {
  int64_t j = begin;
  for (; j + kPairRows <= end; j += kPairRows) word_rows_into<F, kPairRows, M>(job, j, end);
  for (; j < end; ++j) word_rows_into<F, 1, M>(job, j, end);
}

// Q4_K's gemv on rows packed side by side (packed_rows.hpp): a vector holds two weights of
// one sub-block for 16 rows, so vpdpwssd meets them with the activation pair broadcast, and
// a sub-block's sums are scaled once for all 16 rows, with no horizontal sum at the end.
// Per row and sub-block the integer sum is word_tile's, then scaled and added in another
// order: the two agree to f32 rounding.
template <int M>
void packed_group(const PackedQ4_KTile* tiles, int64_t units, const WordRows& x, __m512 (&out)[M]) {
  const int64_t blocks = x.k / 32;
  for (int i = 0; i < M; ++i) out[i] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const PackedQ4_KTile& t = tiles[u];
    prefetch_tile(tiles, u);
    const __m512 d = rows_f16(t.d), dmin = rows_f16(t.dmin);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m512i sums[2][M][2];
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < M; ++i) sums[h][i][0] = sums[h][i][1] = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const __m512i words = _mm512_cvtepu8_epi16(load256(t.codes[p][j]));
        const __m512i codes[2] = {_mm512_and_si512(words, _mm512_set1_epi16(0x0f)), _mm512_srli_epi16(words, 4)};
        for (int i = 0; i < M; ++i)
          for (int h = 0; h < 2; ++h)
            sums[h][i][j % 2] = _mm512_dpwssd_epi32(sums[h][i][j % 2], codes[h], _mm512_set1_epi32(word_pair(x, i, u * kSuperBlock + 64 * p + 32 * h + 2 * j)));
      }
      for (int h = 0; h < 2; ++h) {
        const int s = 2 * p + h;
        const __m512 scale = _mm512_mul_ps(d, rows_u8(t.sc[s])), min = _mm512_mul_ps(dmin, rows_u8(t.mn[s]));
        for (int i = 0; i < M; ++i) {
          const int64_t b = i * blocks + 8 * u + s;
          const __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(sums[h][i][0], sums[h][i][1]));
          out[i] = _mm512_fmadd_ps(sum, _mm512_mul_ps(scale, _mm512_set1_ps(x.scale[b])), out[i]);
          out[i] = _mm512_fnmadd_ps(min, _mm512_set1_ps(x.sum[b]), out[i]);
        }
      }
    }
  }
}

// The gemvs on packed Q6_K, Q4_0 and Q4_1 rows: the strips' product (strip_tile) of one
// strip, its codes made from the tile where they are used instead of stored in a strip and
// read back, for one or two activation rows, with the same integer sums and the same float
// operations in the same order: the strips' bits. For Q6_K, per 256 weights of 16 rows, 13
// bit operations make the four code vectors that eight vpdpbusd meet (two digits), and each
// 16 weights' sums are scaled once for all 16 rows; as stored, each row's codes cost as many
// operations again and a horizontal sum (the pairs: 36-44 GB/s on a Zen 5, matmul_bench
// q8/gemv). For Q4_0 and Q4_1 two operations split a vector into two of codes.
template <int M>
void packed_strip_group(const PackedQ6_KTile* tiles, int64_t units, const ActivationBlock<2>* x, int64_t blocks, __m512 (&out)[M]) {
  for (int i = 0; i < M; ++i) out[i] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const PackedQ6_KTile& t = tiles[u];
    prefetch_tile(tiles, u);
    const __m512 d = rows_f16(t.d);
    for (int p = 0; p < 4; ++p) {
      // acc[c][half][digit][i]: block 2p + c's half against activation row i; the bias's
      // correction starts the last digit's sum, as strip_tile's.
      __m512i acc[2][2][2][M];
      for (int c = 0; c < 2; ++c)
        for (int half = 0; half < 2; ++half)
          for (int i = 0; i < M; ++i) {
            acc[c][half][0][i] = _mm512_setzero_si512();
            acc[c][half][1][i] = _mm512_set1_epi32(x[i * blocks + 8 * u + 2 * p + c].correction[half]);
          }
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
        __m512i codes[2][2];
        q6_k_codes(t, p, h, codes);
        for (int c = 0; c < 2; ++c)
          for (int i = 0; i < M; ++i) {
            const ActivationBlock<2>& a = x[i * blocks + 8 * u + 2 * p + c];
            for (int v = 0; v < 2; ++v)
              for (int digit = 0; digit < 2; ++digit)
                acc[c][h / 2][digit][i] =
                    _mm512_dpbusd_epi32(acc[c][h / 2][digit][i], codes[c][v], broadcast_codes(a.q[digit] + 8 * h + 4 * v));
          }
      }
      for (int c = 0; c < 2; ++c)
        for (int half = 0; half < 2; ++half) {
          const __m512 scale = q6_k_scales(t, d, 4 * p + 2 * c + half);
          for (int i = 0; i < M; ++i) {
            const __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(acc[c][half][0][i], 8), acc[c][half][1][i]);
            const float step = x[i * blocks + 8 * u + 2 * p + c].scale;
            out[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(scale, _mm512_set1_ps(step)), out[i]);
          }
        }
    }
  }
}

template <int M, class Tile>
void packed_nibble_group(const Tile* tiles, int64_t units, const ActivationBlock<2>* x, __m512 (&out)[M]) {
  for (int i = 0; i < M; ++i) out[i] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const Tile& t = tiles[u];
    prefetch_tile(tiles, u);
    // acc[c][digit][i]: weights 16c .. 16c + 15 against activation row i, apart so that
    // twice as many vpdpbusd chains hide each other's latency; the bias's correction (Q4_0's)
    // starts the last digit's sum, as strip_tile's.
    __m512i acc[2][2][M];
    for (int i = 0; i < M; ++i) {
      acc[0][0][i] = acc[1][0][i] = acc[1][1][i] = _mm512_setzero_si512();
      acc[0][1][i] = _mm512_set1_epi32(x[i * units + u].correction[2]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      __m512i codes[2];
      nibble_codes(t.codes[g], codes);
      for (int i = 0; i < M; ++i)
        for (int c = 0; c < 2; ++c)
          for (int digit = 0; digit < 2; ++digit)
            acc[c][digit][i] =
                _mm512_dpbusd_epi32(acc[c][digit][i], codes[c], broadcast_codes(x[i * units + u].q[digit] + 16 * c + 4 * g));
    }
    const __m512 d = rows_f16(t.d);
    for (int i = 0; i < M; ++i) {
      const ActivationBlock<2>& a = x[i * units + u];
      const __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(acc[0][0][i], acc[1][0][i]), 8),
                                           _mm512_add_epi32(acc[0][1][i], acc[1][1][i]));
      out[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(a.scale)), out[i]);
      if constexpr (kTileHasMin<Tile>) out[i] = _mm512_fmadd_ps(rows_f16(t.m), _mm512_set1_ps(a.scaled_sum[2]), out[i]);
    }
  }
}
template <int M>
void packed_strip_group(const PackedQ4_0Tile* tiles, int64_t units, const ActivationBlock<2>* x, int64_t, __m512 (&out)[M]) {
  packed_nibble_group<M>(tiles, units, x, out);
}
template <int M>
void packed_strip_group(const PackedQ4_1Tile* tiles, int64_t units, const ActivationBlock<2>* x, int64_t, __m512 (&out)[M]) {
  packed_nibble_group<M>(tiles, units, x, out);
}

// The packed gemvs' walk over rows [begin, end), whole groups of 16: group(j, out) sums
// the group from row j against the job's m (at most kGemvMaxRows) activation rows, the bias
// added here.
template <class A, class Group>
void packed_gemv(const Job<A>& job, int64_t begin, int64_t end, Group group) {
  static_assert(kGemvMaxRows == 2, "one case per row count");
  if (job.m > kGemvMaxRows) throw std::logic_error("packed_gemv: the AVX-512 packed gemv takes at most two rows");
  const auto walk = [&](auto rows) {
    constexpr int M = decltype(rows)::value;
    for (int64_t j = begin; j < end; j += kPackedRows) {
      __m512 out[M];
      group(j, out);
      const __m512 bias = job.bias ? _mm512_loadu_ps(job.bias + j) : _mm512_setzero_ps();
      for (int i = 0; i < M; ++i) _mm512_storeu_ps(job.y + i * job.n + j, _mm512_add_ps(out[i], bias));
    }
  };
  if (job.m == 2) walk(std::integral_constant<int, 2>{}); else walk(std::integral_constant<int, 1>{});
}

template <class F>
void packed_strip_rows(const Job<ActivationBlock<2>>& job, int64_t begin, int64_t end) {
  const int64_t units = job.k / F::kStep;
  const auto* tiles = static_cast<const PackedTileOf<F>*>(job.packed);
  packed_gemv(job, begin, end, [&](int64_t j, auto& out) {
    packed_strip_group(tiles + (j / kPackedRows) * units, units, job.x, job.units, out);
  });
}

// Q4_K's packed gemv on AVX-512; batches there take the strips or the tiles.
void packed_rows(const Job<WordRows>& job, int64_t begin, int64_t end) {
  const int64_t units = job.k / kSuperBlock;
  const auto* tiles = static_cast<const PackedQ4_KTile*>(job.packed);
  packed_gemv(job, begin, end, [&](int64_t j, auto& out) { packed_group(tiles + (j / kPackedRows) * units, units, *job.x, out); });
}

}  // namespace
}  // namespace orzo::cpu::ORZO_ISA_NS

#endif
