#pragma once
// The x86 intrinsics, for the SIMD kernels. Included before the ORZO_TARGET_BEGIN region
// (target.hpp): GCC's intrinsics carry their own target attributes, so they are usable
// inside it whatever the baseline.

#if defined(__x86_64__) || defined(__i386__)
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
