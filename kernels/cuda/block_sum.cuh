#pragma once
// A sum across a whole thread block, for the kernels that give one block to one row or one
// head (RMSNorm and the per-head q/k norm). Only .cu files include this.
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {

// Every thread gets the sum of every thread's v. blockDim.x must be a multiple of 32 (each
// warp's shuffle mask is the full warp) and at most 1024, every thread must call it, and
// `partials` is 32 floats of shared memory. It ends with a barrier, so the next call may reuse
// `partials` at once.
__device__ __forceinline__ float block_sum(float v, float* partials) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  // Each warp adds up the partials itself rather than waiting for a broadcast.
  const float total = warp_sum(lane < warps ? partials[lane] : 0.0f);
  __syncthreads();
  return total;
}

}  // namespace orzo::cuda
