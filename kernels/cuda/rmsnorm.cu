#include "kernels/cuda/rmsnorm.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {
namespace {

constexpr int kThreads = 256;

// One block per output row. The row is read twice (sum of squares, then scaling); at the
// hidden sizes of these models it stays in L1/L2 between the two passes.
template <typename T>
__global__ void rmsnorm_kernel(const float* x, const float* weight, const int32_t* row_index, int32_t n, float eps,
                               T* out) {
  __shared__ float partials[32];
  const int64_t row = blockIdx.x;
  const int64_t src = row_index ? row_index[row] : row;
  const float* xr = x + src * n;
  float sum_sq = 0.0f;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) sum_sq += xr[i] * xr[i];
  sum_sq = block_sum(sum_sq, partials);
  const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
  T* o = out + row * n;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = from_f32<T>(weight[i] * (xr[i] * inv_rms));
}

}  // namespace

void rmsnorm_rows(Elem elem, const float* x, const float* weight, const int32_t* row_index, int32_t rows,
                  int32_t n, float eps, void* out, cudaStream_t stream) {
  if (rows < 0 || n <= 0)
    throw std::invalid_argument("rmsnorm_rows: bad shape (rows " + std::to_string(rows) + ", n " +
                                std::to_string(n) + "; n must be positive)");
  if (rows == 0) return;
  dispatch_elem(elem, [&](auto zero) {
    using T = decltype(zero);
    rmsnorm_kernel<T><<<rows, kThreads, 0, stream>>>(x, weight, row_index, n, eps, static_cast<T*>(out));
  });
  check_launch("rmsnorm_rows");
}

}  // namespace orzo::cuda
