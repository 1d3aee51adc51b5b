#include "kernels/cuda/expert_rows.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {
namespace {

constexpr int kThreads = 256;

// One block per gathered row.
template <typename T>
__global__ void gather_kernel(const T* src, const int32_t* index, int32_t width, T* dst) {
  const int64_t i = blockIdx.x;
  const T* from = src + static_cast<int64_t>(index[i]) * width;
  T* to = dst + i * width;
  for (int32_t c = threadIdx.x; c < width; c += blockDim.x) to[c] = from[c];
}

// One block per output row; each thread sums its columns over the row's experts in order.
__global__ void combine_kernel(ExpertCombineArgs a) {
  const int64_t row = blockIdx.x;
  const int32_t* slot = a.row_slot + row * a.top_k;
  const float* weight = a.row_weight + row * a.top_k;
  const float scale = a.shared ? 1.0f / (1.0f + expf(-a.shared_gate[row * a.gate_stride])) : 0.0f;
  float* out = a.out + row * a.hidden;
  for (int32_t c = threadIdx.x; c < a.hidden; c += blockDim.x) {
    float sum = a.shared ? a.shared[row * a.hidden + c] * scale : 0.0f;
    for (int32_t j = 0; j < a.top_k; ++j) sum += weight[j] * a.expert_out[static_cast<int64_t>(slot[j]) * a.hidden + c];
    out[c] = a.accumulate ? out[c] + sum : sum;
  }
}

}  // namespace

void gather_rows(Elem elem, const void* src, const int32_t* index, int32_t count, int32_t width, void* dst,
                 cudaStream_t stream) {
  if (count < 0 || width <= 0)
    throw std::invalid_argument("gather_rows: bad shape (count " + std::to_string(count) + ", width " +
                                std::to_string(width) + "; width must be positive)");
  if (count == 0) return;
  dispatch_elem(elem, [&](auto zero) {
    using T = decltype(zero);
    gather_kernel<T><<<count, kThreads, 0, stream>>>(static_cast<const T*>(src), index, width, static_cast<T*>(dst));
  });
  check_launch("gather_rows");
}

void combine_experts(const ExpertCombineArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.top_k <= 0 || a.hidden <= 0 || (a.shared && !a.shared_gate))
    throw std::invalid_argument("combine_experts: bad arguments (rows " + std::to_string(a.rows) + ", top_k " +
                                std::to_string(a.top_k) + ", hidden " + std::to_string(a.hidden) +
                                "; a shared expert needs its gate)");
  if (a.rows == 0) return;
  combine_kernel<<<a.rows, kThreads, 0, stream>>>(a);
  check_launch("combine_experts");
}

}  // namespace orzo::cuda
