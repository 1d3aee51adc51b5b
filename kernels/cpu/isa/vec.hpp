#pragma once
// One SIMD register of f32 lanes and the few operations the CPU kernels need, for the
// widest vector unit this compilation's ISA level has. Where there is none a "vector" is
// one float, so kernels written on Vec are their own portable path. Include it inside the
// ORZO_TARGET_BEGIN region, after simd.hpp; internal linkage, as target.hpp explains.
#include <cstring>

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
// Lane s = vsum(v[s]) for kLanes vectors, bit for bit: the same tree over each one's lanes
// (l and l + 8, then l + 4, l + 2, l + 1), every step adding halves of two vectors at once:
// 45 operations for the 16 sums, where one vsum takes about 7. The steps leave vector
// 4 * m + k (in the order taken) summed in lane 4 * k + m, so the inputs are taken so.
inline Vec vsum_lanes(const Vec* v) {
  const auto at = [v](int j) { return v[4 * (j % 4) + j / 4]; };
  Vec halves[8], quarters[4], pairs[2];
  for (int p = 0; p < 8; ++p)
    halves[p] = _mm512_add_ps(_mm512_shuffle_f32x4(at(2 * p), at(2 * p + 1), 0x44),
                              _mm512_shuffle_f32x4(at(2 * p), at(2 * p + 1), 0xee));
  for (int q = 0; q < 4; ++q)
    quarters[q] = _mm512_add_ps(_mm512_shuffle_f32x4(halves[2 * q], halves[2 * q + 1], 0x88),
                                _mm512_shuffle_f32x4(halves[2 * q], halves[2 * q + 1], 0xdd));
  for (int r = 0; r < 2; ++r)
    pairs[r] = _mm512_add_ps(_mm512_shuffle_ps(quarters[2 * r], quarters[2 * r + 1], 0x44),
                             _mm512_shuffle_ps(quarters[2 * r], quarters[2 * r + 1], 0xee));
  return _mm512_add_ps(_mm512_shuffle_ps(pairs[0], pairs[1], 0x88), _mm512_shuffle_ps(pairs[0], pairs[1], 0xdd));
}
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
// Lane s = vsum(v[s]) for kLanes vectors, bit for bit (l and l + 4, then l + 2, l + 1), as
// on AVX-512; the steps leave vector 2 * m + k (in the order taken) summed in lane 4 * k + m.
inline Vec vsum_lanes(const Vec* v) {
  const auto at = [v](int j) { return v[4 * (j % 2) + j / 2]; };
  Vec halves[4], pairs[2];
  for (int p = 0; p < 4; ++p)
    halves[p] = _mm256_add_ps(_mm256_permute2f128_ps(at(2 * p), at(2 * p + 1), 0x20),
                              _mm256_permute2f128_ps(at(2 * p), at(2 * p + 1), 0x31));
  for (int q = 0; q < 2; ++q)
    pairs[q] = _mm256_add_ps(_mm256_shuffle_ps(halves[2 * q], halves[2 * q + 1], 0x44),
                             _mm256_shuffle_ps(halves[2 * q], halves[2 * q + 1], 0xee));
  return _mm256_add_ps(_mm256_shuffle_ps(pairs[0], pairs[1], 0x88), _mm256_shuffle_ps(pairs[0], pairs[1], 0xdd));
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

// out[s] = vsum(v[s]) for s < n, bit for bit, kLanes at a time (vsum_lanes): dot_rows ends
// with R * M sums, which one at a time outweighed the products at the depth of
// stories260K's (64: four steps of 24 FMAs, then 24 sums of ~7 operations).
inline void vsums(const Vec* v, int n, float* out) {
#if ORZO_SIMD_AVX512 || ORZO_SIMD_AVX2
  for (int s = 0; s < n; s += kLanes) {
    const int count = n - s < kLanes ? n - s : kLanes;
    Vec group[kLanes];
    for (int t = 0; t < kLanes; ++t) group[t] = t < count ? v[s + t] : vzero();
    const Vec sums = vsum_lanes(group);
    std::memcpy(out + s, &sums, sizeof(float) * static_cast<size_t>(count));
  }
#else
  for (int s = 0; s < n; ++s) out[s] = v[s];
#endif
}

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
