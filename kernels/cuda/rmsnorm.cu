#include "kernels/cuda/rmsnorm.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {
namespace {

constexpr int kThreads = 256;

// Where a normalized element goes: rounded into a GEMM's input, or added to the residual.
template <typename T>
struct StoreRounded {
  T* out;
  __device__ void operator()(int64_t i, float v) const { out[i] = from_f32<T>(v); }
};
struct AddTo {
  float* out;
  __device__ void operator()(int64_t i, float v) const { out[i] += v; }
};

// One block per output row. The row is read twice (sum of squares, then scaling); at the
// hidden sizes of these models it stays in L1/L2 between the two passes.
template <typename Store>
__global__ void rmsnorm_kernel(const float* x, const float* weight, const int32_t* row_index, int32_t n, float eps,
                               Store store) {
  __shared__ float partials[32];
  const int64_t row = blockIdx.x;
  const int64_t src = row_index ? row_index[row] : row;
  const float* xr = x + src * n;
  float sum_sq = 0.0f;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) sum_sq += xr[i] * xr[i];
  sum_sq = block_sum(sum_sq, partials);
  const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) store(row * n + i, weight[i] * (xr[i] * inv_rms));
}

void check_shape(const char* what, int32_t rows, int32_t n) {
  if (rows < 0 || n <= 0)
    throw std::invalid_argument(std::string(what) + ": bad shape (rows " + std::to_string(rows) + ", n " +
                                std::to_string(n) + "; n must be positive)");
}

}  // namespace

void rmsnorm_rows(Elem elem, const float* x, const float* weight, const int32_t* row_index, int32_t rows,
                  int32_t n, float eps, void* out, cudaStream_t stream) {
  check_shape("rmsnorm_rows", rows, n);
  if (rows == 0) return;
  dispatch_elem(elem, [&](auto zero) {
    using T = decltype(zero);
    using Store = StoreRounded<T>;
    rmsnorm_kernel<Store><<<rows, kThreads, 0, stream>>>(x, weight, row_index, n, eps, Store{static_cast<T*>(out)});
  });
  check_launch("rmsnorm_rows");
}

void rmsnorm_add_rows(const float* y, const float* weight, int32_t rows, int32_t n, float eps, float* x,
                      cudaStream_t stream) {
  check_shape("rmsnorm_add_rows", rows, n);
  if (rows == 0) return;
  rmsnorm_kernel<AddTo><<<rows, kThreads, 0, stream>>>(y, weight, nullptr, n, eps, AddTo{x});
  check_launch("rmsnorm_add_rows");
}

}  // namespace orzo::cuda
