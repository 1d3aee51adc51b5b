// The integer product of the block types (kernels/cpu/matmul_q8.hpp).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"
#include "kernels/cpu/packed_rows.hpp"

ORZO_TARGET_BEGIN
#include "kernels/cpu/isa/weight_formats.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): internal linkage, as target.hpp explains

#if ORZO_SIMD_VNNI
#define ORZO_Q8_VNNI 1
#elif ORZO_SIMD_AVX2
#define ORZO_Q8_AVX2 1
#endif

#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)

// Signed weight codes meet vpdpbusd / vpmaddubsw (unsigned x signed bytes) with the
// activations as the signed operand and the weights made unsigned by their format's kBias:
// sum (q + bias) * x = sum q * x + bias * sum x, and the second term is subtracted exactly
// in int32 from the block sums of x, kept with the activations. vpdpbusd sums in 32 bits,
// so any bias works. vpmaddubsw saturates pair sums at 2^15, which (q + 128) * 127 twice
// overflows, so on AVX2 the types whose bias is 128 (Q8_0, IQ4) take the sign trick
// instead: |q| * (x * sign(q)), at most 2 * 128 * 127 per pair.
#if defined(ORZO_Q8_VNNI)
template <class F>
constexpr bool kSignTrick = false;
#else
template <class F>
constexpr bool kSignTrick = F::kBias > 64;
#endif

// The `bytes` from `from` into cache, a line at a time, for a later read.
inline void prefetch(const uint8_t* from, int64_t bytes) {
  for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(from + at, 0, 2);
}

// The bias whose correction the activations carry for weights of format F.
template <class F>
constexpr int kActivationBias = kSignTrick<F> ? 0 : F::kBias;

// A format whose Scales unpack all of a super-block's d and m at once (K-quants:
// weight_formats.hpp) takes them from there for all its sub-blocks: each sub-block
// unpacking its own cost a scalar decode per block (Q4_K_M decode of one row on an
// Emerald Rapids: 68 % of the time went to decoding the weights).
template <class F, class = void>
constexpr bool kUnitScales = false;
template <class F>
constexpr bool kUnitScales<F, std::void_t<typename F::Scales>> = true;

// One product: activation rows quantized (`units` of each layout's Activation a row), and
// the weights as stored.
template <class A>
struct Job {
  const A* x;
  int64_t m, k, units;
  const uint8_t* w;
  size_t row_bytes;
  float* y;
  int64_t n;
  const float* bias;
  const PackedQ4_KTile* packed;  // the same rows packed (TensorView::packed), or null
};

// A few activation rows for the word gemvs (word_tile, packed_group): each 32-weight block
// rounded to two int8 digits, as the level's other layouts round it, and each value kept
// as one 16-bit integer, 256 * q[0] + q[1] (at most 32,639 in size).
struct WordRows {
  int64_t k = 0;
  std::vector<int16_t> q;    // m rows of k codes: each block's value (round_block)
  std::vector<float> scale;  // each block's scale
  std::vector<float> sum;    // and scale * the sum of its values (the blocks' scaled sum)
  // Room for m rows of k; grown, never shrunk, so a steady loop allocates nothing.
  void resize(int64_t m, int64_t k_) {
    const size_t count = static_cast<size_t>(m * (k_ / 32));
    k = k_;
    q.resize(std::max(q.size(), static_cast<size_t>(m * k_)));
    scale.resize(std::max(scale.size(), count));
    sum.resize(std::max(sum.size(), count));
  }
};

// Words e, e + 1 of activation row i as one 32-bit lane, for a broadcast.
inline int32_t word_pair(const WordRows& x, int64_t i, int64_t e) {
  int32_t pair;
  std::memcpy(&pair, x.q.data() + i * x.k + e, sizeof pair);
  return pair;
}

// Tiles of packed rows (packed_rows.hpp) fetched this far ahead of tile u: with the
// hardware prefetchers alone a 2-thread AVX-512 gemv read 29-34 GB/s of this Zen 4's 49
// (matmul_bench q8/packed); one tile ahead 25-31, two 40-45, four 35-40. Past the last
// tile this names the next group's, or bytes past the matrix, which a prefetch may name:
// it never faults (an address, so that no pointer runs past its array).
constexpr int kPackedAhead = 2;
inline void prefetch_tile(const PackedQ4_KTile* tiles, int64_t u) {
  prefetch(reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(tiles + u) + kPackedAhead * sizeof(PackedQ4_KTile)),
           sizeof(PackedQ4_KTile));
}

#if defined(ORZO_Q8_VNNI)

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

template <class F, int Digits>
void rows_range(const Job<ActivationOf<Digits>>& job, int64_t begin, int64_t end) {
  thread_local std::vector<StripOf<F>> scratch;
  scratch.resize(std::max(scratch.size(), static_cast<size_t>(kPanelStrips * job.units)));
  for (int64_t j = begin; j < end; j += kPanelStrips * kStripRows) {
    const int strips = static_cast<int>(std::min<int64_t>(kPanelStrips, (end - j + kStripRows - 1) / kStripRows));
    for (int s = 0; s < strips; ++s) {
      const int64_t first = j + kStripRows * s;
      const int rows = static_cast<int>(std::min<int64_t>(kStripRows, end - first));
      if constexpr (std::is_same_v<F, Q4_KFormat>)
        if (job.packed) {
          const int64_t units = job.k / kSuperBlock;
          decode_packed_strip(job.packed + first / kStripRows * units, units, scratch.data() + s * job.units);
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

template <int M>
void packed_gemv(const Job<WordRows>& job, int64_t begin, int64_t end) {
  const int64_t units = job.k / kSuperBlock;
  const PackedQ4_KTile* tiles = job.packed;
  for (int64_t j = begin; j < end; j += kPackedRows) {
    __m512 out[M];
    packed_group<M>(tiles + (j / kPackedRows) * units, units, *job.x, out);
    const __m512 bias = job.bias ? _mm512_loadu_ps(job.bias + j) : _mm512_setzero_ps();
    for (int i = 0; i < M; ++i) _mm512_storeu_ps(job.y + i * job.n + j, _mm512_add_ps(out[i], bias));
  }
}

// The packed gemv on AVX-512; batches there take the strips or the tiles.
void packed_rows(const Job<WordRows>& job, int64_t begin, int64_t end) {
  static_assert(kGemvMaxRows == 2, "one case per row count");
  if (job.m > kGemvMaxRows) throw std::logic_error("packed_rows: the AVX-512 packed gemv takes at most two rows");
  if (job.m == 2) packed_gemv<2>(job, begin, end); else packed_gemv<1>(job, begin, end);
}

#else  // AVX2

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
          decode_packed_rows(job.packed + (j + g) / kPackedRows * units, units, scratch.data() + g * job.units, job.units);
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
  packed_group<M>(job.packed + (j / kPackedRows) * (job.k / kSuperBlock), job.k / kSuperBlock, *job.x, i0, out);
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

#endif

// Both levels' gemv walks (gemv_rows), by the number of activation rows.
template <class F, int Digits>
void gemv_range(const Job<GemvActivationOf<Digits>>& job, int64_t begin, int64_t end) {
  static_assert(kGemvMaxRows == 2, "one case per row count");
  switch (job.m) {
    case 2: gemv_rows<F, Digits, 2>(job, begin, end); break;
    default: gemv_rows<F, Digits, 1>(job, begin, end); break;
  }
}

// The range function of weights of format F against activations laid out as A: the
// gemv's (weights as stored, a few rows) or the batched one's.
template <class A>
struct Kernel {
  void (*range)(const Job<A>&, int64_t, int64_t);
  int activation_bias;
};

template <class F, class A, bool Gemv>
constexpr Kernel<A> kernel_of() {
  if constexpr (Gemv)
    return {gemv_range<F, A::kDigits>, kActivationBias<F>};
  else
    return {rows_range<F, A::kDigits>, kActivationBias<F>};
}

template <class A, bool Gemv>
Kernel<A> kernel_for(DType t) {
  switch (t) {
    case DType::Q8_0: return kernel_of<Q8_0Format, A, Gemv>();
    case DType::Q4_0: return kernel_of<Q4_0Format, A, Gemv>();
    case DType::Q4_1: return kernel_of<Q4_1Format, A, Gemv>();
    case DType::Q5_0: return kernel_of<Q5_0Format, A, Gemv>();
    case DType::Q5_1: return kernel_of<Q5_1Format, A, Gemv>();
    case DType::Q2_K: return kernel_of<Q2_KFormat, A, Gemv>();
    case DType::Q3_K: return kernel_of<Q3_KFormat, A, Gemv>();
    case DType::Q4_K: return kernel_of<Q4_KFormat, A, Gemv>();
    case DType::Q5_K: return kernel_of<Q5_KFormat, A, Gemv>();
    case DType::Q6_K: return kernel_of<Q6_KFormat, A, Gemv>();
    case DType::IQ4_NL: return kernel_of<IQ4_NLFormat, A, Gemv>();
    case DType::IQ4_XS: return kernel_of<IQ4_XSFormat, A, Gemv>();
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;
  }
  throw std::logic_error("matmul_q8: not a block type");
}

// Chunks of 16 output columns keep two threads from writing the same cache line of y.
constexpr int64_t kGrain = 16;

template <class Activation, bool Gemv = false>
void product(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  const Kernel<Activation> kernel = kernel_for<Activation, Gemv>(w.dtype);
  const int64_t k = w.cols(), units = Activation::units(k);
  // Reused across calls and never shrunk, so a steady loop neither allocates nor clears.
  thread_local std::vector<Activation> activations;
  activations.resize(std::max(activations.size(), static_cast<size_t>(m * units)));
  Activation* act = activations.data();
  pool.parallel_for(m, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) quantize_row(x + i * k, k, kernel.activation_bias, act + i * units);
  });
  const Job<Activation> job{act, m, k, units, static_cast<const uint8_t*>(w.data), dtype_row_bytes(w.dtype, k), y, w.rows(), bias,
                            static_cast<const PackedQ4_KTile*>(w.packed)};
  pool.parallel_for(job.n, [&](int64_t begin, int64_t end, int) { kernel.range(job, begin, end); }, kGrain);
}

// Activation rows against Q4_K weights as words: packed_group where packed (AVX2, at any
// m), else on AVX-512 word_tile on the rows as stored (at most kGemvMaxRows).
void word_product(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  const int64_t k = w.cols();
  thread_local WordRows kept;
  WordRows& words = kept;  // the caller's: a pool thread naming `kept` would get its own
  words.resize(m, k);
  // A decode's few rows are rounded where the call runs, without waking the pool.
  constexpr int64_t kRoundedAlone = 4;
  pool.parallel_for(m, [&](int64_t begin, int64_t end, int) { quantize_words(x, begin, end, k, words); }, kRoundedAlone);
  const Job<WordRows> job{&words, m, k, 0, static_cast<const uint8_t*>(w.data), dtype_row_bytes(w.dtype, k), y, w.rows(), bias,
                          static_cast<const PackedQ4_KTile*>(w.packed)};
  if (job.packed) {
    static_assert(kGrain % kPackedRows == 0, "a thread's range is whole groups");
    pool.parallel_for(job.n, [&](int64_t begin, int64_t end, int) { packed_rows(job, begin, end); }, kGrain);
    return;
  }
#if defined(ORZO_Q8_VNNI)
  static_assert(kGemvMaxRows == 2, "one case per row count");
  pool.parallel_for(job.n, [&](int64_t begin, int64_t end, int) {
    if (m == 2) word_rows<Q4_KFormat, 2>(job, begin, end); else word_rows<Q4_KFormat, 1>(job, begin, end);
  }, kGrain);
#else
  throw std::logic_error("word_product: " + w.name + " is not packed");
#endif
}

#endif

}  // namespace

bool matmul_q8_supports(DType t) {
#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)
  return dtype_is_quantized(t);
#else
  (void)t;
  return false;
#endif
}

void matmul_q8(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)
  product<ActivationOf<1>>(x, m, w, y, pool, bias);
#else
  (void)x, (void)m, (void)y, (void)pool, (void)bias;
  throw std::logic_error("matmul_q8: no integer path for " + w.name + " in this build");
#endif
}

#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)
void matmul_q16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  product<ActivationOf<2>>(x, m, w, y, pool, bias);
}

void matmul_q16_gemv(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  if (m > kGemvMaxRows)
    throw std::logic_error("matmul_q16_gemv: " + std::to_string(m) + " rows, past its " + std::to_string(kGemvMaxRows));
#if defined(ORZO_Q8_VNNI)
  if (w.dtype == DType::Q4_K) return word_product(x, m, w, y, pool, bias);
#else
  if (w.packed) return word_product(x, m, w, y, pool, bias);
#endif
  product<GemvActivationOf<2>, true>(x, m, w, y, pool, bias);
}
#endif

#if defined(ORZO_Q8_AVX2)
void matmul_packed_words(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  if (!w.packed) throw std::logic_error("matmul_packed_words: " + w.name + " is not packed");
  word_product(x, m, w, y, pool, bias);
}
#endif

#undef ORZO_Q8_VNNI
#undef ORZO_Q8_AVX2

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_END
