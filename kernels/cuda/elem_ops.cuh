#pragma once
// Device-side helpers shared by the kernels: loads and stores of the storage types as f32,
// and the dispatch from the host's Elem to the CUDA type. Only .cu files include this.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

// Calls f with a value of the CUDA type that `e` names: dispatch_elem(e, [&](auto zero) {
// using T = decltype(zero); ... }).
template <typename F>
void dispatch_elem(Elem e, F&& f) {
  if (e == Elem::bf16)
    f(__nv_bfloat16{});
  else
    f(__half{});
}

// Sum and max across a warp; every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace orzo::cuda
