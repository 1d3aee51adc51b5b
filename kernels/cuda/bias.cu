#include "kernels/cuda/bias.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"

namespace orzo::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

// A grid-stride walk over all rows * n elements, so any row count fits the grid.
__global__ void add_bias_kernel(float* x, const float* bias, int64_t total, int32_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    x[i] += bias[i % n];
}

}  // namespace

void add_bias_rows(float* x, const float* bias, int32_t rows, int32_t n, cudaStream_t stream) {
  if (rows < 0 || n < 0)
    throw std::invalid_argument("add_bias_rows: negative shape (rows " + std::to_string(rows) + ", n " +
                                std::to_string(n) + ")");
  const int64_t total = static_cast<int64_t>(rows) * n;
  if (total == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  add_bias_kernel<<<blocks, kThreads, 0, stream>>>(x, bias, total, n);
  check_launch("add_bias_rows");
}

}  // namespace orzo::cuda
