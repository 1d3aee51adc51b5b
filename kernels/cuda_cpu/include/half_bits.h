#pragma once
// The bit conversions of the CPU emulator's __half and __nv_bfloat16 (cuda_fp16.h,
// cuda_bf16.h), written from the CUDA Math API's definitions: from f32 round to nearest, ties
// to even; f16 overflows to infinity from 65520 up and keeps subnormals; a NaN becomes the
// canonical NaN 0x7fff, as __float2half_rn and __float2bfloat16_rn return it.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace orzo::cuda_cpu {

inline uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}
inline float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

inline uint16_t f32_to_f16_rn(float f) {
  const uint32_t x = float_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fff;
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and up round to infinity
  if (ax < 0x38800000u)  // below 2^-14: a multiple of 2^-24, which the scaling by 2^24 keeps exact
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(bits_float(ax) * 16777216.0f)));
  const uint32_t m = ax - (112u << 23);  // exponent rebiased from 127 to 15
  return static_cast<uint16_t>(sign | ((m + 0x0fffu + ((m >> 13) & 1u)) >> 13));
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (man << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t f32_to_bf16_rn(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

}  // namespace orzo::cuda_cpu
