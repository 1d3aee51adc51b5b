#pragma once
// __half on the CPU emulator (kernels/cuda_cpu/): the storage type and the conversions the
// kernels call, rounding as the device does (half_bits.h).
#include "cuda_runtime_api.h"
#include "half_bits.h"

struct __half {
  unsigned short __x;
};
struct __half2 {
  __half x, y;
};

inline float __half2float(__half h) { return ::orzo::cuda_cpu::f16_to_f32(h.__x); }
inline __half __float2half_rn(float f) { return __half{::orzo::cuda_cpu::f32_to_f16_rn(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
inline __half2 __floats2half2_rn(float a, float b) { return {__float2half_rn(a), __float2half_rn(b)}; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short x) { return __half{x}; }
