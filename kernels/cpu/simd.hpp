#pragma once
// What the SIMD kernels share: the x86 intrinsics header (where the target has them) and
// unaligned loads from mapped weight bytes.
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) || defined(__F16C__) || defined(__AVX512F__)
// GCC 12 reports its own AVX-512 intrinsics as reading uninitialized values (GCC bug
// 105593, the _mm512_undefined_* idiom); the warning is about the header, not our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

namespace orzo::cpu {

// Weight bytes come straight from a mapped file, so nothing wider than a byte is assumed
// to be aligned; memcpy compiles to a plain load.
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace orzo::cpu
