// F16 and BF16 rows to and from f32, for the embedding lookup, the BLAS path's weight tiles
// and the writers (kernels/cpu/convert.hpp): bit-exact with core's scalar conversions on
// every path.
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "core/quant_blocks.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"

ORZO_TARGET_BEGIN
#include "kernels/cpu/isa/f16_row.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {

// Each converter runs its widest loop first and falls through to narrower ones, so a
// row whose length is not a multiple of the vector width exercises every path.
inline void f32_row_to_f16(const float* src, int64_t n, uint8_t* dst) {
  int64_t i = 0;
#if ORZO_SIMD_AVX512
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), h);
  }
#endif
#if ORZO_SIMD_AVX2
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
#endif
  for (; i < n; ++i) store_u16(dst + 2 * i, f32_to_f16(src[i]));
}

inline void bf16_row_to_f32(const uint8_t* src, int64_t n, float* dst) {
  int64_t i = 0;
#if ORZO_SIMD_AVX512
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
#endif
#if ORZO_SIMD_AVX2
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
#endif
  for (; i < n; ++i) dst[i] = bf16_to_f32(load_u16(src + 2 * i));
}

// The hardware bf16 instructions flush subnormals to zero, so rounding is done on the
// integer bits instead, exactly as f32_to_bf16 does it.
inline void f32_row_to_bf16(const float* src, int64_t n, uint8_t* dst) {
  int64_t i = 0;
#if ORZO_SIMD_AVX512
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  for (; i + 16 <= n; i += 16) {
    const __m512i bits = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, abs_mask), inf);
    const __m512i out = _mm512_mask_blend_epi32(nan, rounded, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), _mm512_cvtepi32_epi16(out));
  }
#endif
#if ORZO_SIMD_AVX2
  const __m256i abs_mask8 = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf8 = _mm256_set1_epi32(0x7f800000);
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, abs_mask8), inf8);
    const __m256i out = _mm256_blendv_epi8(rounded, quiet, nan);
    // packus works per 128-bit lane; the permute gathers both halves into the low lane.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(out, out), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), _mm256_castsi256_si128(packed));
  }
#endif
  for (; i < n; ++i) store_u16(dst + 2 * i, f32_to_bf16(src[i]));
}

}  // namespace

void half_row_to_f32(DType t, const uint8_t* src, int64_t n, float* dst) {
  if (t == DType::F16)
    f16_row_to_f32(reinterpret_cast<const uint16_t*>(src), n, dst);
  else
    bf16_row_to_f32(src, n, dst);
}

void f32_row_to_half(DType t, const float* src, int64_t n, uint8_t* dst) {
  if (t == DType::F16)
    f32_row_to_f16(src, n, dst);
  else
    f32_row_to_bf16(src, n, dst);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_END
