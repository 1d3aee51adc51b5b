#include "kernels/cuda/embedding.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row: the token is read once, and the row's columns go to the threads.
template <typename T>
__global__ void embed_kernel(const T* table, const int32_t* tokens, int32_t hidden, float scale, float* x) {
  const int64_t row = blockIdx.x;
  const int32_t token = tokens[row];
  float* dst = x + row * hidden;
  if (token < 0) {
    for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = 0.0f;
    return;
  }
  const T* src = table + static_cast<int64_t>(token) * hidden;
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = to_f32(src[i]) * scale;
}

}  // namespace

void embed_rows(Elem elem, const void* table, const int32_t* tokens, int32_t rows, int32_t hidden, float scale,
                float* x, cudaStream_t stream) {
  if (rows < 0 || hidden < 0)
    throw std::invalid_argument("embed_rows: negative shape (rows " + std::to_string(rows) + ", hidden " +
                                std::to_string(hidden) + ")");
  if (rows == 0 || hidden == 0) return;
  dispatch_elem(elem, [&](auto zero) {
    using T = decltype(zero);
    embed_kernel<T><<<rows, kThreads, 0, stream>>>(static_cast<const T*>(table), tokens, hidden, scale, x);
  });
  check_launch("embed_rows");
}

}  // namespace orzo::cuda
