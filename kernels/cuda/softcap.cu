#include "kernels/cuda/softcap.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"

namespace orzo::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

// A grid-stride walk over all rows * n elements, so any row count fits the grid.
__global__ void softcap_kernel(float* x, int64_t total, float cap) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    x[i] = cap * tanhf(x[i] / cap);
}

}  // namespace

void softcap_rows(float* x, int32_t rows, int32_t n, float cap, cudaStream_t stream) {
  if (rows < 0 || n < 0)
    throw std::invalid_argument("softcap_rows: negative shape (rows " + std::to_string(rows) + ", n " +
                                std::to_string(n) + ")");
  if (!(cap > 0.0f)) throw std::invalid_argument("softcap_rows: cap " + std::to_string(cap) + " is not positive");
  const int64_t total = static_cast<int64_t>(rows) * n;
  if (total == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  softcap_kernel<<<blocks, kThreads, 0, stream>>>(x, total, cap);
  check_launch("softcap_rows");
}

}  // namespace orzo::cuda
