#pragma once
// How the direct matmul walks each stored weight type: a row is a sequence of units (a
// vector's worth of floats, or one quant block) of kStepBytes bytes and kStep weights,
// and load(unit, sub, out) decodes sub-step `sub` of a unit into kVecs registers, so that
// kSubs * kVecs * kLanes == kStep. A sub-step of a quant block is 32 weights: few enough
// registers to leave room for accumulators, one or two of the block's scales.
//
// The float types leave a tail of k % kLanes weights for element(); block types never do,
// since their rows are whole blocks. Decoding here is exact for the float types and, for
// the quants, equal to dequantize_blocks up to the rounding of d * q + m (one FMA here),
// except where a format leaves the scales to the product (direct_product.hpp's
// ScalesAfterSum and PartScales: Q8_0, Q5_K and Q6_K on AVX2, Q4_K on both vector levels),
// whose load() gives the integer codes themselves, exactly (or d * q, one rounding, on
// AVX-512), and whose sums are then f32 sums of another order, within the same rounding
// bound.
// Include it inside the ORZO_TARGET_BEGIN region, after the headers below; internal
// linkage, as target.hpp explains.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/isa/vec.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): see target.hpp

// Whether the PartScales formats' load() scales the codes it decodes (direct_product.hpp):
// Q4_K on AVX-512 does; Q4_K, Q5_K and Q6_K on AVX2 leave d to the product. AVX-512 holds
// R weight rows of two vectors each in registers, shared by up to eight activation rows:
// d * q costs one multiply per vector there, once, where a part's raw dot costs one op more
// per activation row (Q4_K_M at 32 rows: 0.77x of the scaled codes on an Emerald Rapids).
// AVX2 decodes a row at a time and sums each part before it scales it.
constexpr bool kScalesInLoad = ORZO_SIMD_AVX512;

struct F32Format {
  static constexpr int64_t kStep = kLanes, kStepBytes = 4 * kStep;
  static constexpr int kSubs = 1, kVecs = 1;
  static constexpr bool kBlocked = false;
  static void load(const uint8_t* p, int, Vec* out) {
#if ORZO_SIMD_AVX512
    out[0] = _mm512_loadu_ps(reinterpret_cast<const float*>(p));
#elif ORZO_SIMD_AVX2
    out[0] = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
#else
    std::memcpy(out, p, sizeof(float));
#endif
  }
  static float element(const uint8_t* row, int64_t c) {
    float f;
    std::memcpy(&f, row + 4 * c, sizeof f);
    return f;
  }
};

struct F16Format {
  static constexpr int64_t kStep = kLanes, kStepBytes = 2 * kStep;
  static constexpr int kSubs = 1, kVecs = 1;
  static constexpr bool kBlocked = false;
  static void load(const uint8_t* p, int, Vec* out) {
#if ORZO_SIMD_AVX512
    out[0] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif ORZO_SIMD_AVX2
    out[0] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
    out[0] = f16_to_f32(load_u16(p));
#endif
  }
  static float element(const uint8_t* row, int64_t c) { return f16_to_f32(load_u16(row + 2 * c)); }
};

struct BF16Format {
  static constexpr int64_t kStep = kLanes, kStepBytes = 2 * kStep;
  static constexpr int kSubs = 1, kVecs = 1;
  static constexpr bool kBlocked = false;
  static void load(const uint8_t* p, int, Vec* out) {
#if ORZO_SIMD_AVX512
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    out[0] = _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
#elif ORZO_SIMD_AVX2
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    out[0] = _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
#else
    out[0] = bf16_to_f32(load_u16(p));
#endif
  }
  static float element(const uint8_t* row, int64_t c) { return bf16_to_f32(load_u16(row + 2 * c)); }
};

#if ORZO_SIMD_AVX2

inline float half_at(const uint8_t* block, size_t offset) { return _cvtsh_ss(load_u16(block + offset)); }

// One sub-step of a block as 32 signed integer codes, with the scale and offset of each
// half of 16 (the K-quants with 16-weight sub-blocks give the halves their own): weight
// = d * q + m. Each format's codes(block, sub) gives them, and its kBias is the least
// constant that makes every code non-negative (q + kBias fits a byte), for the integer
// products of matmul_q8 whose weight operand is unsigned, and q + kBias < 2^kCodeBits
// (which bounds those products' partial sums); kHasMin says whether m can be
// non-zero, which costs that path a second term per block.
struct Codes {
  __m256i q;
  float d[2], m[2];
};

// Whether F's halves can differ in d and m (specialized below for Q2_K, Q3_K and Q6_K):
// elsewhere one scale holds for all 32 codes, which matmul_q8 applies once a block.
template <class F>
constexpr bool kScalesPerHalf = false;

// x = d * q + m for the 32 codes, into kVecs = 32 / kLanes registers.
inline void expand(const Codes& c, Vec* out) {
  const __m128i halves[2] = {_mm256_castsi256_si128(c.q), _mm256_extracti128_si256(c.q, 1)};
#if ORZO_SIMD_AVX512
  for (int h = 0; h < 2; ++h)
    out[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(halves[h])), _mm512_set1_ps(c.d[h]),
                             _mm512_set1_ps(c.m[h]));
#else
  for (int v = 0; v < 4; ++v) {
    const __m128i part = v % 2 == 0 ? halves[v / 2] : _mm_srli_si128(halves[v / 2], 8);
    out[v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part)), _mm256_set1_ps(c.d[v / 2]),
                             _mm256_set1_ps(c.m[v / 2]));
  }
#endif
}

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Bits [shift, shift + width) of each of 32 bytes.
inline __m256i bits_of(__m256i bytes, int shift, int width) {
  return _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(static_cast<char>((1 << width) - 1)));
}

// The 32 codes of 16 bytes of nibbles, in block order: low nibbles first, then high ones.
inline __m256i split_nibbles(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), _mm_and_si128(bytes, mask));
}

// `value` in byte j where bit j of the 32-bit little-endian word at qh is set: the fifth
// bit of the Q5_0/Q5_1 codes. Each byte gathers its source byte, then tests its own bit.
inline __m256i word_bits(const uint8_t* qh, int8_t value) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof bits);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(value));
}

// `value` where bit b of each of 32 bytes is set: the K-quants' extra high bit.
inline __m256i bit_plane(const uint8_t* bytes, int b, int8_t value) {
  const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << b));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(load256(bytes), mask), mask), _mm256_set1_epi8(value));
}

// IQ4's non-uniform levels in place of 4-bit codes.
inline __m256i iq4_levels(__m256i codes) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels));
  return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), codes);
}

// The raw-code decoders (Q8_0, Q4_0, Q4_1, Q5_K and Q6_K on AVX2; Q4_K on both vector
// levels) widen a vector's worth of bytes straight from memory to int32 lanes (vpmovzxbd
// takes a load), where splitting one register into parts costs shuffles a vector.
#if ORZO_SIMD_AVX512
using IVec = __m512i;
inline IVec widen_u8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// Nibble h of each widened byte.
inline IVec nibble(IVec bytes, int h) {
  return h ? _mm512_srli_epi32(bytes, 4) : _mm512_and_si512(bytes, _mm512_set1_epi32(0x0f));
}
inline Vec to_vec(IVec q) { return _mm512_cvtepi32_ps(q); }
#else
// AVX2 decodes a sub-step eight weights at a time. Q4_0 and Q4_1 then scale each vector
// (one FMA for d * q + m, one for the product); Q8_0 and the K-quants leave the scales to
// the product.
using IVec = __m256i;
inline IVec widen_u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline IVec widen_i8(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline IVec nibble(IVec bytes, int h) {
  return h ? _mm256_srli_epi32(bytes, 4) : _mm256_and_si256(bytes, _mm256_set1_epi32(0x0f));
}
inline IVec ior(IVec a, IVec b) { return _mm256_or_si256(a, b); }
inline Vec to_vec(IVec q) { return _mm256_cvtepi32_ps(q); }
// Bits [from, from + width) of each int32 lane moved to bits [to, to + width).
inline IVec move_bits(IVec v, int from, int width, int to) {
  const IVec kept = _mm256_and_si256(v, _mm256_set1_epi32(((1 << width) - 1) << from));
  return from < to ? _mm256_slli_epi32(kept, to - from) : _mm256_srli_epi32(kept, from - to);
}
inline Vec scaled(IVec q, float d, float m) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(d), _mm256_set1_ps(m));
}
#endif
// Eight sub-block scale codes (bytes) as d * code, the scales a super-block's sub-steps take.
inline void scale_codes(uint64_t codes8, float d, float* out) {
  const __m256 codes = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(codes8))));
  _mm256_store_ps(out, _mm256_mul_ps(codes, _mm256_set1_ps(d)));
}

#if ORZO_SIMD_AVX512
// A 4-bit code indexes a 16-entry table of decoded values: vpermps reads only the low four
// bits of each index, so 16 codes decode in one instruction, without masking or an
// int-to-float conversion. Entry i is (first + i) * d + m.
inline __m512 level_table(float first, float d, float m) {
  const __m512 levels = _mm512_add_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_ps(first));
  return _mm512_fmadd_ps(levels, _mm512_set1_ps(d), _mm512_set1_ps(m));
}
inline __m512 iq4_table(float d) {
  const __m128i levels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(levels)), _mm512_set1_ps(d));
}
// 32 weights from 16 bytes of nibbles (the low nibbles are weights 0..15).
inline void lookup_split(const uint8_t* qs, __m512 table, Vec* out) {
  const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  out[0] = _mm512_permutexvar_ps(bytes, table);
  out[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
}
#endif

#if ORZO_SIMD_AVX512
// Two 32-weight blocks as one vector, for matmul_q8's gemv: the low and high nibbles of 16
// bytes at a (block a's weights 0..15, 16..31), then those at b.
inline __m512i nibble_pair(const uint8_t* a, const uint8_t* b) {
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  const __m512i twice = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(both));
  constexpr long long kBy4 = 0x0004000400040004;
  return _mm512_and_si512(_mm512_srlv_epi16(twice, _mm512_setr_epi64(0, 0, kBy4, kBy4, 0, 0, kBy4, kBy4)),
                          _mm512_set1_epi8(0x0f));
}
// The f16 scale at offset `at` of blocks a and b and the f16 after each (a Q4_1/Q5_1
// block's m; for the other formats, bytes of no meaning): {d_a, next_a, d_b, next_b}.
inline __m128 half_pairs(const uint8_t* a, const uint8_t* b, size_t at) {
  uint32_t x, y;
  std::memcpy(&x, a + at, sizeof x);
  std::memcpy(&y, b + at, sizeof y);
  return _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(x)), static_cast<int>(y), 1));
}
#endif

// What every block type shares: sub-steps of 32 weights.
template <int64_t Elems, class Block>
struct BlockUnit {
  static constexpr int64_t kStep = Elems, kStepBytes = sizeof(Block);
  static constexpr int kSubs = static_cast<int>(Elems / 32), kVecs = 32 / kLanes;
  static constexpr bool kBlocked = true;
};

struct Q8_0Format : BlockUnit<kQuantBlock, BlockQ8_0> {
  static constexpr int kBias = 128, kCodeBits = 8;
  static constexpr bool kHasMin = false;
  static Codes codes(const uint8_t* b, int) {
    const float d = half_at(b, offsetof(BlockQ8_0, d));
    return {load256(b + offsetof(BlockQ8_0, qs)), {d, d}, {0, 0}};
  }
#if ORZO_SIMD_AVX512
  // Blocks a and b as matmul_q8's gemv takes them: their unsigned codes (q + kBias) in
  // one vector, and {d_a, -, d_b, -}.
  static __m512i block_pair_codes(const uint8_t* a, const uint8_t* b) {
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(load256(a + offsetof(BlockQ8_0, qs))),
                                         load256(b + offsetof(BlockQ8_0, qs)), 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static __m128 block_pair_scales(const uint8_t* a, const uint8_t* b) { return half_pairs(a, b, offsetof(BlockQ8_0, d)); }
#endif
#if ORZO_SIMD_AVX512
  static void load(const uint8_t* b, int s, Vec* out) { expand(codes(b, s), out); }
#else
  // The codes unscaled: the product scales a sub-step's sum by d (sub_scale), one multiply
  // per 32 weights where scaling each weight cost one per 8.
  static float sub_scale(const uint8_t* b, int) { return half_at(b, offsetof(BlockQ8_0, d)); }
  static void load(const uint8_t* b, int, Vec* out) {
    for (int v = 0; v < 4; ++v) out[v] = _mm256_cvtepi32_ps(widen_i8(b + offsetof(BlockQ8_0, qs) + 8 * v));
  }
#endif
};

struct Q4_0Format : BlockUnit<kQuantBlock, BlockQ4_0> {
  static constexpr int kBias = 8, kCodeBits = 4;
  static constexpr bool kHasMin = false;
  static Codes codes(const uint8_t* b, int) {
    const float d = half_at(b, offsetof(BlockQ4_0, d));
    return {_mm256_sub_epi8(split_nibbles(b + offsetof(BlockQ4_0, qs)), _mm256_set1_epi8(8)), {d, d}, {0, 0}};
  }
#if ORZO_SIMD_AVX512
  // As Q8_0's: the raw nibbles are q + kBias.
  static __m512i block_pair_codes(const uint8_t* a, const uint8_t* b) {
    return nibble_pair(a + offsetof(BlockQ4_0, qs), b + offsetof(BlockQ4_0, qs));
  }
  static __m128 block_pair_scales(const uint8_t* a, const uint8_t* b) { return half_pairs(a, b, offsetof(BlockQ4_0, d)); }
#endif
  static void load(const uint8_t* b, [[maybe_unused]] int s, Vec* out) {
#if ORZO_SIMD_AVX512
    lookup_split(b + offsetof(BlockQ4_0, qs), level_table(-8, half_at(b, offsetof(BlockQ4_0, d)), 0), out);
#else
    // d * q - 8 d, one rounding: d * (q - 8) exactly as the reference rounds it.
    const float d = half_at(b, offsetof(BlockQ4_0, d));
    for (int v = 0; v < 4; ++v) out[v] = scaled(nibble(widen_u8(b + offsetof(BlockQ4_0, qs) + 8 * (v % 2)), v / 2), d, -8.0f * d);
#endif
  }
};

struct Q4_1Format : BlockUnit<kQuantBlock, BlockQ4_1> {
  static constexpr int kBias = 0, kCodeBits = 4;
  static constexpr bool kHasMin = true;
  static Codes codes(const uint8_t* b, int) {
    const float d = half_at(b, offsetof(BlockQ4_1, d)), m = half_at(b, offsetof(BlockQ4_1, m));
    return {split_nibbles(b + offsetof(BlockQ4_1, qs)), {d, d}, {m, m}};
  }
#if ORZO_SIMD_AVX512
  // As Q8_0's, with {d_a, m_a, d_b, m_b}.
  static __m512i block_pair_codes(const uint8_t* a, const uint8_t* b) {
    return nibble_pair(a + offsetof(BlockQ4_1, qs), b + offsetof(BlockQ4_1, qs));
  }
  static_assert(offsetof(BlockQ4_1, m) == offsetof(BlockQ4_1, d) + 2, "half_pairs reads m right after d");
  static __m128 block_pair_scales(const uint8_t* a, const uint8_t* b) { return half_pairs(a, b, offsetof(BlockQ4_1, d)); }
#endif
  static void load(const uint8_t* b, [[maybe_unused]] int s, Vec* out) {
#if ORZO_SIMD_AVX512
    lookup_split(b + offsetof(BlockQ4_1, qs),
                 level_table(0, half_at(b, offsetof(BlockQ4_1, d)), half_at(b, offsetof(BlockQ4_1, m))), out);
#else
    const float d = half_at(b, offsetof(BlockQ4_1, d)), m = half_at(b, offsetof(BlockQ4_1, m));
    for (int v = 0; v < 4; ++v) out[v] = scaled(nibble(widen_u8(b + offsetof(BlockQ4_1, qs) + 8 * (v % 2)), v / 2), d, m);
#endif
  }
};

struct Q5_0Format : BlockUnit<kQuantBlock, BlockQ5_0> {
  static constexpr int kBias = 16, kCodeBits = 5;
  static constexpr bool kHasMin = false;
  static Codes codes(const uint8_t* b, int) {
    const float d = half_at(b, offsetof(BlockQ5_0, d));
    const __m256i q = _mm256_or_si256(split_nibbles(b + offsetof(BlockQ5_0, qs)), word_bits(b + offsetof(BlockQ5_0, qh), 0x10));
    return {_mm256_sub_epi8(q, _mm256_set1_epi8(16)), {d, d}, {0, 0}};
  }
  static void load(const uint8_t* b, int s, Vec* out) { expand(codes(b, s), out); }
};

struct Q5_1Format : BlockUnit<kQuantBlock, BlockQ5_1> {
  static constexpr int kBias = 0, kCodeBits = 5;
  static constexpr bool kHasMin = true;
  static Codes codes(const uint8_t* b, int) {
    const float d = half_at(b, offsetof(BlockQ5_1, d)), m = half_at(b, offsetof(BlockQ5_1, m));
    const __m256i q = _mm256_or_si256(split_nibbles(b + offsetof(BlockQ5_1, qs)), word_bits(b + offsetof(BlockQ5_1, qh), 0x10));
    return {q, {d, d}, {m, m}};
  }
  static void load(const uint8_t* b, int s, Vec* out) { expand(codes(b, s), out); }
};

struct IQ4_NLFormat : BlockUnit<kQuantBlock, BlockIQ4_NL> {
  static constexpr int kBias = 128, kCodeBits = 8;
  static constexpr bool kHasMin = false;
  static Codes codes(const uint8_t* b, int) {
    const float d = half_at(b, offsetof(BlockIQ4_NL, d));
    return {iq4_levels(split_nibbles(b + offsetof(BlockIQ4_NL, qs))), {d, d}, {0, 0}};
  }
#if ORZO_SIMD_AVX512
  // As Q8_0's: each nibble looks up its level + kBias.
  static __m512i block_pair_codes(const uint8_t* a, const uint8_t* b) {
    const __m128i levels = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels)), _mm_set1_epi8(static_cast<char>(0x80)));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(levels), nibble_pair(a + offsetof(BlockIQ4_NL, qs), b + offsetof(BlockIQ4_NL, qs)));
  }
  static __m128 block_pair_scales(const uint8_t* a, const uint8_t* b) { return half_pairs(a, b, offsetof(BlockIQ4_NL, d)); }
#endif
  static void load(const uint8_t* b, [[maybe_unused]] int s, Vec* out) {
#if ORZO_SIMD_AVX512
    lookup_split(b + offsetof(BlockIQ4_NL, qs), iq4_table(half_at(b, offsetof(BlockIQ4_NL, d))), out);
#else
    expand(codes(b, s), out);
#endif
  }
};

// Sub-step s of Q2_K/Q3_K: weights 32 s.. hold bits 2 (s % 4) of qs[32 (s / 4)..].
inline __m256i k_two_bits(const uint8_t* qs, int s) { return bits_of(load256(qs + 32 * (s / 4)), 2 * (s % 4), 2); }

struct Q2_KFormat : BlockUnit<kSuperBlock, BlockQ2_K> {
  static constexpr int kBias = 0, kCodeBits = 2;
  static constexpr bool kHasMin = true;
  static Codes codes(const uint8_t* b, int s) {
    const float d = half_at(b, offsetof(BlockQ2_K, d)), dmin = half_at(b, offsetof(BlockQ2_K, dmin));
    const uint8_t* scales = b + offsetof(BlockQ2_K, scales) + 2 * s;
    Codes c{k_two_bits(b + offsetof(BlockQ2_K, qs), s), {}, {}};
    for (int h = 0; h < 2; ++h) {
      c.d[h] = d * static_cast<float>(scales[h] & 0x0f);
      c.m[h] = -(dmin * static_cast<float>(scales[h] >> 4));
    }
    return c;
  }
  static void load(const uint8_t* b, int s, Vec* out) { expand(codes(b, s), out); }
};

struct Q3_KFormat : BlockUnit<kSuperBlock, BlockQ3_K> {
  static constexpr int kBias = 4, kCodeBits = 3;
  static constexpr bool kHasMin = false;
  static Codes codes(const uint8_t* b, int s) {
    const float d = half_at(b, offsetof(BlockQ3_K, d));
    const uint8_t* scales = b + offsetof(BlockQ3_K, scales);
    // A set high bit means the 2-bit code stands as it is; a clear one subtracts 4.
    const __m256i high = bit_plane(b + offsetof(BlockQ3_K, hmask), s, 4);
    Codes c{_mm256_sub_epi8(_mm256_add_epi8(k_two_bits(b + offsetof(BlockQ3_K, qs), s), high), _mm256_set1_epi8(4)), {}, {0, 0}};
    for (int h = 0; h < 2; ++h) {
      const int sub = 2 * s + h;
      const int low = (scales[sub % 8] >> (4 * (sub / 8))) & 0x0f, hi = (scales[8 + sub % 4] >> (2 * (sub / 4))) & 3;
      c.d[h] = d * static_cast<float>((low | hi << 4) - 32);
    }
    return c;
  }
  static void load(const uint8_t* b, int s, Vec* out) { expand(codes(b, s), out); }
};

// Sub-block s of Q4_K/Q5_K: scale d * sc and offset -dmin * mn, 4-bit codes in nibble
// s % 2 of qs[32 (s / 2)..].
template <class Block>
inline void k_scale_min(const uint8_t* b, int s, float& dl, float& ml) {
  uint8_t sc, mn;
  kq_scale_min(b + offsetof(Block, scales), s, sc, mn);
  dl = half_at(b, offsetof(Block, d)) * static_cast<float>(sc);
  ml = -(half_at(b, offsetof(Block, dmin)) * static_cast<float>(mn));
}

// The eight sub-blocks' d * sc and -dmin * mn of a Q4_K/Q5_K super-block, unpacked once
// per super-block (four bytes at a time: kq_scale_min's rule for every s) rather than once
// per sub-step.
struct KScales {
  alignas(32) float d[8], m[8];
};
template <class Block>
inline KScales k_scales(const uint8_t* b) {
  uint32_t a[3];
  std::memcpy(a, b + offsetof(Block, scales), sizeof a);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint64_t sc = (a[0] & kLow6) | uint64_t{(a[2] & kLow4) | ((a[0] >> 6) & kLow2) << 4} << 32;
  const uint64_t mn = (a[1] & kLow6) | uint64_t{((a[2] >> 4) & kLow4) | ((a[1] >> 6) & kLow2) << 4} << 32;
  KScales out;
  scale_codes(sc, half_at(b, offsetof(Block, d)), out.d);
  scale_codes(mn, -half_at(b, offsetof(Block, dmin)), out.m);
  return out;
}

struct Q4_KFormat : BlockUnit<kSuperBlock, BlockQ4_K> {
  static constexpr int kBias = 0, kCodeBits = 4;
  static constexpr bool kHasMin = true;
  static Codes codes(const uint8_t* b, int s) {
    float dl, ml;
    k_scale_min<BlockQ4_K>(b, s, dl, ml);
    return {bits_of(load256(b + offsetof(BlockQ4_K, qs) + 32 * (s / 2)), 4 * (s % 2), 4), {dl, dl}, {ml, ml}};
  }
  // The codes scaled by their sub-block's d where kScalesInLoad says so, unscaled otherwise;
  // the offsets m, and d where unscaled, applied by the product (PartScales).
  static constexpr int kParts = 1;
  using Scales = KScales;
  static Scales scales(const uint8_t* b) { return k_scales<BlockQ4_K>(b); }
#if ORZO_SIMD_AVX512
  // Sub-blocks 2p and 2p + 1 as one vector of unsigned codes in their stored order: the
  // low and the high nibbles of the same 32 bytes.
  static __m512i pair_codes(const uint8_t* b, int p) {
    const __m512i bytes = _mm512_broadcast_i64x4(load256(b + offsetof(BlockQ4_K, qs) + 32 * p));
    const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(bytes, shifts), _mm512_set1_epi8(0x0f));
  }
  // The same two sub-blocks as words (matmul_q8's word gemv), a byte widened per word.
  static void pair_words(const uint8_t* b, int p, __m512i& first, __m512i& second) {
    const __m512i words = _mm512_cvtepu8_epi16(load256(b + offsetof(BlockQ4_K, qs) + 32 * p));
    first = _mm512_and_si512(words, _mm512_set1_epi16(0x0f));
    second = _mm512_srli_epi16(words, 4);
  }
#endif
  static void load(const uint8_t* b, int s, const Scales& scales, Vec* out) {
    const uint8_t* qs = b + offsetof(BlockQ4_K, qs) + 32 * (s / 2);
    for (int v = 0; v < kVecs; ++v) out[v] = to_vec(nibble(widen_u8(qs + kLanes * v), s % 2));
    if constexpr (kScalesInLoad)
      for (int v = 0; v < kVecs; ++v) out[v] = vmul(out[v], vset1(scales.d[s]));
  }
};

struct Q5_KFormat : BlockUnit<kSuperBlock, BlockQ5_K> {
  static constexpr int kBias = 0, kCodeBits = 5;
  static constexpr bool kHasMin = true;
  static Codes codes(const uint8_t* b, int s) {
    float dl, ml;
    k_scale_min<BlockQ5_K>(b, s, dl, ml);
    const __m256i low = bits_of(load256(b + offsetof(BlockQ5_K, qs) + 32 * (s / 2)), 4 * (s % 2), 4);
    return {_mm256_or_si256(low, bit_plane(b + offsetof(BlockQ5_K, qh), s, 0x10)), {dl, dl}, {ml, ml}};
  }
  using Scales = KScales;
  static Scales scales(const uint8_t* b) { return k_scales<BlockQ5_K>(b); }
#if ORZO_SIMD_AVX512
  // Bit planes cost AVX-512 more to widen lane by lane than to merge in 32 bytes and expand
  // (as Q6_K, measured there).
  static void load(const uint8_t* b, int s, Vec* out) { expand(codes(b, s), out); }
#else
  // As Q4_K's.
  static constexpr int kParts = 1;
  static void load(const uint8_t* b, int s, const Scales&, Vec* out) {
    const uint8_t* qs = b + offsetof(BlockQ5_K, qs) + 32 * (s / 2);
    const uint8_t* qh = b + offsetof(BlockQ5_K, qh);
    for (int v = 0; v < kVecs; ++v)
      out[v] = to_vec(ior(nibble(widen_u8(qs + kLanes * v), s % 2), move_bits(widen_u8(qh + kLanes * v), s, 1, 4)));
  }
#endif
};

struct Q6_KFormat : BlockUnit<kSuperBlock, BlockQ6_K> {
  static constexpr int kBias = 32, kCodeBits = 6;
  static constexpr bool kHasMin = false;
  static Codes codes(const uint8_t* b, int s) {
    const float d = half_at(b, offsetof(BlockQ6_K, d));
    const auto* scales = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales)) + 2 * s;
    const int c = s / 4, r = s % 4;
    const __m256i low = bits_of(load256(b + offsetof(BlockQ6_K, ql) + 64 * c + 32 * (r % 2)), 4 * (r / 2), 4);
    const __m256i high = bits_of(load256(b + offsetof(BlockQ6_K, qh) + 32 * c), 2 * r, 2);
    // The high codes are at most 3, so a 16-bit shift keeps each in its own byte.
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 4)), _mm256_set1_epi8(32));
    return {q, {d * static_cast<float>(scales[0]), d * static_cast<float>(scales[1])}, {0, 0}};
  }
  // The sixteen half sub-blocks' d * scale and -32 times that, for the unsigned codes.
  struct Scales {
    alignas(32) float d[16], m[16];
  };
  static Scales scales(const uint8_t* b) {
    const float d = half_at(b, offsetof(BlockQ6_K, d));
    Scales out;
    for (int h = 0; h < 2; ++h) {
      const __m128i codes8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + offsetof(BlockQ6_K, scales) + 8 * h));
      const __m256 dl = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes8)), _mm256_set1_ps(d));
      _mm256_store_ps(out.d + 8 * h, dl);
      _mm256_store_ps(out.m + 8 * h, _mm256_mul_ps(dl, _mm256_set1_ps(-32.0f)));
    }
    return out;
  }
#if ORZO_SIMD_AVX512
  // Sub-blocks 2p and 2p + 1 as one vector of unsigned codes (q + 32, the six bits as
  // stored) in their stored order. Both take the low nibbles of 64 bytes of ql, or both the
  // high ones, and two bit pairs of the same 32 bytes of qh, which the 16-bit shifts move
  // to bits 4-5 (bits shifted in from the neighbouring byte fall outside the mask).
  static __m512i pair_codes(const uint8_t* b, int p) {
    const int c = p / 2, high = p % 2;
    const __m512i ql = _mm512_loadu_si512(b + offsetof(BlockQ6_K, ql) + 64 * c);
    const __m512i qh = _mm512_broadcast_i64x4(load256(b + offsetof(BlockQ6_K, qh) + 32 * c));
    const __m512i nibbles = high ? _mm512_srli_epi16(ql, 4) : ql;
    // Sub-block 4c + r holds bits 2r, 2r + 1 of qh: r = 0, 1 shift left by 4 and 2; r = 2, 3
    // right by 0 and 2.
    const __m512i by = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i bits = high ? _mm512_srlv_epi16(qh, by) : _mm512_sllv_epi16(qh, _mm512_sub_epi16(_mm512_set1_epi16(4), by));
    return _mm512_or_si512(_mm512_and_si512(nibbles, _mm512_set1_epi8(0x0f)), _mm512_and_si512(bits, _mm512_set1_epi8(0x30)));
  }
  // The codes merged in 32 bytes and expanded with their scales: widening the two bit planes
  // lane by lane, as AVX2 does, put more 512-bit operations on the ports the FMAs use (on an
  // Emerald Rapids, 0.72x at 32 activation rows, even at one).
  static void load(const uint8_t* b, int s, Vec* out) { expand(codes(b, s), out); }
#else
  // PartScales, as Q4_K's: a sub-step is two parts of 16.
  static constexpr int kParts = 2;
  static void load(const uint8_t* b, int s, const Scales&, Vec* out) {
    const int c = s / 4, r = s % 4;
    const uint8_t* ql = b + offsetof(BlockQ6_K, ql) + 64 * c + 32 * (r % 2);
    const uint8_t* qh = b + offsetof(BlockQ6_K, qh) + 32 * c;
    for (int v = 0; v < kVecs; ++v)
      out[v] = to_vec(ior(nibble(widen_u8(ql + kLanes * v), r / 2), move_bits(widen_u8(qh + kLanes * v), 2 * r, 2, 4)));
  }
#endif
};

struct IQ4_XSFormat : BlockUnit<kSuperBlock, BlockIQ4_XS> {
  static constexpr int kBias = 128, kCodeBits = 8;
  static constexpr bool kHasMin = false;
  static float scale(const uint8_t* b, int s) {
    const unsigned scales_h = load_u16(b + offsetof(BlockIQ4_XS, scales_h));
    const uint8_t scales_l = b[offsetof(BlockIQ4_XS, scales_l) + s / 2];
    const int scale = (((scales_l >> (4 * (s % 2))) & 0x0f) | ((scales_h >> (2 * s)) & 3) << 4) - 32;
    return half_at(b, offsetof(BlockIQ4_XS, d)) * static_cast<float>(scale);
  }
  static Codes codes(const uint8_t* b, int s) {
    const float dl = scale(b, s);
    return {iq4_levels(split_nibbles(b + offsetof(BlockIQ4_XS, qs) + 16 * s)), {dl, dl}, {0, 0}};
  }
  static void load(const uint8_t* b, int s, Vec* out) {
#if ORZO_SIMD_AVX512
    lookup_split(b + offsetof(BlockIQ4_XS, qs) + 16 * s, iq4_table(scale(b, s)), out);
#else
    expand(codes(b, s), out);
#endif
  }
};

template <>
constexpr bool kScalesPerHalf<Q2_KFormat> = true;
template <>
constexpr bool kScalesPerHalf<Q3_KFormat> = true;
template <>
constexpr bool kScalesPerHalf<Q6_KFormat> = true;

#else  // no AVX2: every block decodes whole, through the reference

template <DType T, int64_t Elems, class Block>
struct ReferenceFormat {
  static constexpr int64_t kStep = Elems, kStepBytes = sizeof(Block);
  static constexpr int kSubs = 1, kVecs = static_cast<int>(Elems);
  static constexpr bool kBlocked = true;
  static void load(const uint8_t* b, int, Vec* out) { dequantize_blocks(T, b, Elems, out); }
};

using Q8_0Format = ReferenceFormat<DType::Q8_0, kQuantBlock, BlockQ8_0>;
using Q4_0Format = ReferenceFormat<DType::Q4_0, kQuantBlock, BlockQ4_0>;
using Q4_1Format = ReferenceFormat<DType::Q4_1, kQuantBlock, BlockQ4_1>;
using Q5_0Format = ReferenceFormat<DType::Q5_0, kQuantBlock, BlockQ5_0>;
using Q5_1Format = ReferenceFormat<DType::Q5_1, kQuantBlock, BlockQ5_1>;
using IQ4_NLFormat = ReferenceFormat<DType::IQ4_NL, kQuantBlock, BlockIQ4_NL>;
using Q2_KFormat = ReferenceFormat<DType::Q2_K, kSuperBlock, BlockQ2_K>;
using Q3_KFormat = ReferenceFormat<DType::Q3_K, kSuperBlock, BlockQ3_K>;
using Q4_KFormat = ReferenceFormat<DType::Q4_K, kSuperBlock, BlockQ4_K>;
using Q5_KFormat = ReferenceFormat<DType::Q5_K, kSuperBlock, BlockQ5_K>;
using Q6_KFormat = ReferenceFormat<DType::Q6_K, kSuperBlock, BlockQ6_K>;
using IQ4_XSFormat = ReferenceFormat<DType::IQ4_XS, kSuperBlock, BlockIQ4_XS>;

#endif

}  // namespace
}  // namespace orzo::cpu::ORZO_ISA_NS
