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

void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = exp_nonpositive((x[i] - shift) / divisor);
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
