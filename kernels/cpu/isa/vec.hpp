#pragma once
// One SIMD register of f32 lanes and the few operations the CPU kernels need, for the
// widest vector unit this compilation's ISA level has. Where there is none a "vector" is
// one float, so kernels written on Vec are their own portable path. Include it inside the
// ORZO_TARGET_BEGIN region, after simd.hpp; internal linkage, as target.hpp explains.
#include "kernels/cpu/isa/simd.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): see above

#if ORZO_SIMD_AVX512
using Vec = __m512;
constexpr int kLanes = 16;
constexpr int kRegisters = 32;
inline Vec vzero() { return _mm512_setzero_ps(); }
inline Vec vset1(float f) { return _mm512_set1_ps(f); }
inline Vec vload(const float* p) { return _mm512_loadu_ps(p); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec vmul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline float vsum(Vec v) { return _mm512_reduce_add_ps(v); }
// The first n lanes from p, zeros after them.
inline Vec vload_first(const float* p, int n) {
  return n == kLanes ? vload(p) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
#elif ORZO_SIMD_AVX2
using Vec = __m256;
constexpr int kLanes = 8;
constexpr int kRegisters = 16;
inline Vec vzero() { return _mm256_setzero_ps(); }
inline Vec vset1(float f) { return _mm256_set1_ps(f); }
inline Vec vload(const float* p) { return _mm256_loadu_ps(p); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec vmul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline float vsum(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline Vec vload_first(const float* p, int n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return n == kLanes ? vload(p) : _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes));
}
#else
using Vec = float;
constexpr int kLanes = 1;
constexpr int kRegisters = 16;
inline Vec vzero() { return 0.0f; }
inline Vec vset1(float f) { return f; }
inline Vec vload(const float* p) { return *p; }
inline Vec vfma(Vec a, Vec b, Vec c) { return a * b + c; }
inline Vec vmul(Vec a, Vec b) { return a * b; }
inline Vec vadd(Vec a, Vec b) { return a + b; }
inline float vsum(Vec v) { return v; }
inline Vec vload_first(const float* p, int) { return *p; }
#endif

// GCC folds a load into every FMA that uses it, turning R FMAs on one activation vector
// into R loads of it; at one 512-bit load per cycle that, not the FMAs, would bound a
// kernel. An empty asm that claims to change the register makes the load happen once.
inline void keep_in_register([[maybe_unused]] Vec& v) {
#if defined(__GNUC__) && ORZO_SIMD_AVX2
  asm("" : "+v"(v));
#endif
}

}  // namespace
}  // namespace orzo::cpu::ORZO_ISA_NS
