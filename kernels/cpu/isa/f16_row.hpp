#pragma once
// F16 elements widened to f32, bit-exact with core's f16_to_f32 on every path: the
// conversion rows (half_rows.cpp) and an f16 KV cache's chunks (attention_tile.cpp) share
// it. Include it inside the ORZO_TARGET_BEGIN region, after simd.hpp and core/dtype.hpp;
// internal linkage, as target.hpp explains.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa/simd.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): see above

// Runs its widest loop first and falls through to narrower ones, so a row whose length is
// not a multiple of the vector width exercises every path.
inline void f16_row_to_f32(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
#if ORZO_SIMD_AVX512
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#endif
#if ORZO_SIMD_AVX2
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i + 4 <= n; i += 4)
    _mm_storeu_ps(dst + i, _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) {
    uint16_t h;  // a weight row's bytes need not be 2-aligned
    std::memcpy(&h, src + i, sizeof h);
#if ORZO_SIMD_AVX2
    dst[i] = _cvtsh_ss(h);
#else
    dst[i] = f16_to_f32(h);
#endif
  }
}

}  // namespace
}  // namespace orzo::cpu::ORZO_ISA_NS
