#pragma once
// __nv_bfloat16 on the CPU emulator (kernels/cuda_cpu/): the storage type and the conversions
// the kernels call, rounding as the device does (half_bits.h).
#include "cuda_runtime_api.h"
#include "half_bits.h"

struct __nv_bfloat16 {
  unsigned short __x;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline float __bfloat162float(__nv_bfloat16 b) { return ::orzo::cuda_cpu::bf16_to_f32(b.__x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{::orzo::cuda_cpu::f32_to_bf16_rn(f)}; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float2 __bfloat1622float2(__nv_bfloat162 b) { return {__bfloat162float(b.x), __bfloat162float(b.y)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { return __nv_bfloat16{x}; }
