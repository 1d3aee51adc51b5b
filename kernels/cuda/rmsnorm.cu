#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/device.hpp"

namespace orzo::cuda {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// One block per row; the sum of squares is reduced in f32 across the block.
__global__ void rmsnorm_kernel(const float* x, const float* w, int64_t n, float eps, float* out) {
  const float* xr = x + blockIdx.x * n;
  float* yr = out + blockIdx.x * n;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i] * xr[i];
  __shared__ float partial[32];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    sum = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (threadIdx.x == 0) partial[0] = rsqrtf(sum / static_cast<float>(n) + eps);
  }
  __syncthreads();
  const float inv_rms = partial[0];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = w[i] * (xr[i] * inv_rms);
}

}  // namespace

bool gpu_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    return false;
  }
  return true;
}

void rmsnorm_rows(const float* x, const float* weight, int64_t rows, int64_t n, float eps, float* out) {
  const size_t bytes = static_cast<size_t>(rows * n) * sizeof(float);
  float *dx = nullptr, *dw = nullptr, *dy = nullptr;
  check(cudaMalloc(&dx, bytes), "cudaMalloc");
  check(cudaMalloc(&dw, static_cast<size_t>(n) * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&dy, bytes), "cudaMalloc");
  check(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(dw, weight, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  rmsnorm_kernel<<<static_cast<unsigned>(rows), 256>>>(dx, dw, n, eps, dy);
  check(cudaGetLastError(), "rmsnorm_kernel");
  check(cudaMemcpy(out, dy, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dy);
}

}  // namespace orzo::cuda
