// The sampler's passes over a whole vocabulary (kernels/cpu/sampler_rows.hpp), once per token
// drawn or scored: exponentials, and an output constraint's mask. Compiled per level, so that
// exp_nonpositive's fmas are the vector unit's instead of calls into libm (the same bits: an
// fma rounds once wherever it runs), and a mask word becomes masked vector stores.
#include <cstdint>
#include <limits>

#include "core/exp_nonpositive.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"

ORZO_TARGET_BEGIN

namespace orzo::cpu::ORZO_ISA_NS {

#if ORZO_SIMD_AVX2 && !ORZO_SIMD_AVX512
// exp_nonpositive's operations in eight lanes: GCC vectorizes its loop for AVX-512 but not
// for AVX2, where it ran one lane at a time (0.6 ms of a 152k-token draw on a Zen 4).
inline __m256 exp_nonpositive8(__m256 x) {
  using E = ExpNonpositive;
  const __m256 lowest = _mm256_set1_ps(E::kLowest), zero = _mm256_setzero_ps();
  const __m256 above = _mm256_cmp_ps(x, lowest, _CMP_GT_OQ);
  const __m256 clamped = _mm256_blendv_ps(lowest, _mm256_blendv_ps(zero, x, _mm256_cmp_ps(x, zero, _CMP_LT_OQ)), above);
  const __m256 rounding = _mm256_set1_ps(E::kRoundingShift);
  const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(clamped, _mm256_set1_ps(E::kLog2e), rounding), rounding);
  const __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-E::kLn2Low), _mm256_fmadd_ps(n, _mm256_set1_ps(-E::kLn2High), clamped));
  __m256 p = _mm256_set1_ps(E::inverse_factorial(E::kDegree));
  for (int k = E::kDegree - 1; k >= 0; --k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(E::inverse_factorial(k)));
  const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_blendv_ps(zero, _mm256_mul_ps(p, _mm256_castsi256_ps(exponent)), above);
}
#endif

void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out) {
  int64_t i = 0;
#if ORZO_SIMD_AVX2 && !ORZO_SIMD_AVX512
  const __m256 s = _mm256_set1_ps(shift), d = _mm256_set1_ps(divisor);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, exp_nonpositive8(_mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), s), d)));
#endif
  for (; i < n; ++i) out[i] = exp_nonpositive((x[i] - shift) / divisor);
}

// Eight running maxima: one would wait on each comparison before the next.
float max_row(const float* x, int64_t n) {
  constexpr int64_t kRunning = 8;
  float top[kRunning];
  for (float& t : top) t = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kRunning <= n; i += kRunning)
    for (int64_t j = 0; j < kRunning; ++j) top[j] = x[i + j] > top[j] ? x[i + j] : top[j];
  for (; i < n; ++i) top[0] = x[i] > top[0] ? x[i] : top[0];
  float m = top[0];
  for (int64_t j = 1; j < kRunning; ++j) m = top[j] > m ? top[j] : m;
  return m;
}

// Two vectors a test: a survivor is rare once a selection's floor has risen, so the loop is
// bound by its loads and compares, not by the branch.
int64_t first_above(const float* x, int64_t begin, int64_t n, float floor) {
  int64_t i = begin;
#if ORZO_SIMD_AVX512
  const __m512 f = _mm512_set1_ps(floor);
  for (; i + 32 <= n; i += 32) {
    const __mmask16 low = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), f, _CMP_GT_OQ);
    const __mmask16 high = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 16), f, _CMP_GT_OQ);
    if (low | high) return i + __builtin_ctz(static_cast<uint32_t>(low) | static_cast<uint32_t>(high) << 16);
  }
#elif ORZO_SIMD_AVX2
  const __m256 f = _mm256_set1_ps(floor);
  for (; i + 16 <= n; i += 16) {
    const int low = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), f, _CMP_GT_OQ));
    const int high = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), f, _CMP_GT_OQ));
    if (low | high) return i + __builtin_ctz(static_cast<uint32_t>(low) | static_cast<uint32_t>(high) << 8);
  }
#else
  // Blocks the baseline compiler vectorizes; the scalar loop then finds the one in the block.
  constexpr int64_t kBlock = 16;
  for (; i + kBlock <= n; i += kBlock) {
    int above = 0;
    for (int64_t j = 0; j < kBlock; ++j) above += x[i + j] > floor;
    if (above > 0) break;
  }
#endif
  for (; i < n; ++i)
    if (x[i] > floor) return i;
  return n;
}

// The operations the scalar loop below names, lane by lane (min_ps is `a < b ? a : b`,
// cvtt truncates): the compiler does not vectorize that loop, and it was a third of a draw.
void bucket_rows(const float* x, const float* w, int64_t n, const BucketScale& s, uint16_t* out) {
  int64_t i = 0;
#if ORZO_SIMD_AVX512
  const __m512 shift = _mm512_set1_ps(s.shift), divisor = _mm512_set1_ps(s.divisor);
  const __m512 per_unit = _mm512_set1_ps(s.per_unit), deepest = _mm512_set1_ps(s.deepest);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512i zero = _mm512_set1_epi32(s.zero), none = _mm512_set1_epi32(s.none);
  for (; i < n; i += 16) {
    const auto lanes = static_cast<__mmask16>(n - i >= 16 ? 0xffffu : (1u << (n - i)) - 1);
    const __m512 z = _mm512_maskz_loadu_ps(lanes, x + i), weight = _mm512_maskz_loadu_ps(lanes, w + i);
    const __m512 depth = _mm512_mul_ps(_mm512_xor_ps(_mm512_div_ps(_mm512_sub_ps(z, shift), divisor), sign), per_unit);
    __m512i b = _mm512_cvttps_epi32(_mm512_min_ps(depth, deepest));
    b = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(weight, _mm512_setzero_ps(), _CMP_GT_OQ), zero, b);
    b = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(z, z, _CMP_UNORD_Q), b, none);
    _mm256_mask_storeu_epi16(out + i, lanes, _mm512_cvtepi32_epi16(b));
  }
#elif ORZO_SIMD_AVX2
  const __m256 shift = _mm256_set1_ps(s.shift), divisor = _mm256_set1_ps(s.divisor);
  const __m256 per_unit = _mm256_set1_ps(s.per_unit), deepest = _mm256_set1_ps(s.deepest);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i zero = _mm256_set1_epi32(s.zero), none = _mm256_set1_epi32(s.none);
  for (; i + 8 <= n; i += 8) {
    const __m256 z = _mm256_loadu_ps(x + i), weight = _mm256_loadu_ps(w + i);
    const __m256 depth = _mm256_mul_ps(_mm256_xor_ps(_mm256_div_ps(_mm256_sub_ps(z, shift), divisor), sign), per_unit);
    __m256i b = _mm256_cvttps_epi32(_mm256_min_ps(depth, deepest));
    b = _mm256_blendv_epi8(zero, b, _mm256_castps_si256(_mm256_cmp_ps(weight, _mm256_setzero_ps(), _CMP_GT_OQ)));
    b = _mm256_blendv_epi8(b, none, _mm256_castps_si256(_mm256_cmp_ps(z, z, _CMP_UNORD_Q)));
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), words);
  }
#endif
  for (; i < n; ++i) {
    const float z = x[i];
    const float depth = -((z - s.shift) / s.divisor) * s.per_unit;
    const auto b = static_cast<uint16_t>(static_cast<int32_t>(depth < s.deepest ? depth : s.deepest));
    out[i] = z != z ? s.none : w[i] > 0.0f ? b : s.zero;
  }
}

void mask_row(const uint64_t* allowed, float* logits, int64_t n) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  int64_t base = 0;
  for (; base + 64 <= n; base += 64) {
    const uint64_t word = allowed[base >> 6];
    if (word == ~uint64_t{0}) continue;
    float* const row = logits + base;
#if ORZO_SIMD_AVX512
    const __m512 minus_inf = _mm512_set1_ps(kMinusInf);
    for (int j = 0; j < 4; ++j) {
      const auto keep = static_cast<__mmask16>(word >> (16 * j));
      _mm512_storeu_ps(row + 16 * j, _mm512_mask_mov_ps(minus_inf, keep, _mm512_loadu_ps(row + 16 * j)));
    }
#else
    if (word == 0) {
      for (int i = 0; i < 64; ++i) row[i] = kMinusInf;
      continue;
    }
    for (int i = 0; i < 64; ++i)
      if (!((word >> i) & 1)) row[i] = kMinusInf;
#endif
  }
  for (int64_t i = base; i < n; ++i)
    if (!((allowed[i >> 6] >> (i & 63)) & 1)) logits[i] = kMinusInf;
}

}  // namespace orzo::cpu::ORZO_ISA_NS

ORZO_TARGET_END
