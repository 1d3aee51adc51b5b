#include "kernels/cuda/expert_routing.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kGroupThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

// cpu::route_experts' order of experts: the higher probability first, the lower id on a tie.
__device__ __forceinline__ bool ranks_before(float pa, int32_t a, float pb, int32_t b) {
  return pa > pb || (pa == pb && a < b);
}

// One warp per row; the row's experts are spread over its lanes. The k best are found one
// after another, each the best of the experts that rank after the one before it, so nothing
// needs marking and the experts can be any number.
__global__ void route_kernel(const float* logits, int32_t stride, int32_t rows, int32_t experts, int32_t top_k,
                             bool renormalize, int32_t* choice, float* weight) {
  const int32_t lane = static_cast<int32_t>(threadIdx.x % 32);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp: rows are per warp
  const float* z = logits + row * stride;
  float top = -INFINITY;
  for (int32_t e = lane; e < experts; e += 32) top = fmaxf(top, z[e]);
  top = warp_max(top);
  float sum = 0.0f;
  for (int32_t e = lane; e < experts; e += 32) sum += expf(z[e] - top);
  sum = warp_sum(sum);

  int32_t* row_choice = choice + row * top_k;
  float* row_weight = weight + row * top_k;
  float prev_p = INFINITY, kept = 0.0f;
  int32_t prev = -1;
  for (int32_t i = 0; i < top_k; ++i) {
    // The best after (prev_p, prev) among this lane's experts; `experts` stands for none.
    float best_p = 0.0f;
    int32_t best = experts;
    for (int32_t e = lane; e < experts; e += 32) {
      const float p = expf(z[e] - top) / sum;
      if (ranks_before(prev_p, prev, p, e) && (best == experts || ranks_before(p, e, best_p, best))) {
        best_p = p;
        best = e;
      }
    }
    // ... and across the warp: the order is total, so every lane ends with the same one.
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other_p = __shfl_xor_sync(kFullMask, best_p, offset);
      const int32_t other = __shfl_xor_sync(kFullMask, best, offset);
      if (other != experts && (best == experts || ranks_before(other_p, other, best_p, best))) {
        best_p = other_p;
        best = other;
      }
    }
    if (lane == 0) {
      row_choice[i] = best;
      row_weight[i] = best_p;
    }
    kept += best_p;
    prev_p = best_p;
    prev = best;
  }
  if (renormalize && lane == 0)
    for (int32_t i = 0; i < top_k; ++i) row_weight[i] = row_weight[i] / kept;
}

// One block. Each thread takes experts e = threadIdx.x, + blockDim.x, ...: it counts the
// choices of e, then (after the prefix sum) places them in row order. A choice outside
// [0, experts) (a NaN row) is placed nowhere, so nothing is written out of bounds.
__global__ void group_kernel(const int32_t* choice, const float* weight, int32_t rows, int32_t top_k, int32_t experts,
                             int32_t* begin, int32_t* grouped_row, int32_t* row_slot, float* row_weight) {
  const int64_t choices = static_cast<int64_t>(rows) * top_k;
  for (int32_t e = static_cast<int32_t>(threadIdx.x); e < experts; e += blockDim.x) {
    int32_t n = 0;
    for (int64_t i = 0; i < choices; ++i) n += choice[i] == e;
    begin[e + 1] = n;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    begin[0] = 0;
    for (int32_t e = 0; e < experts; ++e) begin[e + 1] += begin[e];
  }
  __syncthreads();
  for (int32_t e = static_cast<int32_t>(threadIdx.x); e < experts; e += blockDim.x) {
    int32_t at = begin[e];
    for (int64_t i = 0; i < choices; ++i) {
      if (choice[i] != e) continue;
      const int64_t row = i / top_k;
      const int32_t* mine = choice + row * top_k;
      int32_t rank = 0;  // how many of the row's experts come before e
      for (int32_t j = 0; j < top_k; ++j) rank += mine[j] < e;
      grouped_row[at] = static_cast<int32_t>(row);
      row_slot[row * top_k + rank] = at;
      row_weight[row * top_k + rank] = weight[i];
      ++at;
    }
  }
}

void check_shape(const char* what, int32_t rows, int32_t experts, int32_t top_k) {
  if (rows < 0 || experts <= 0 || top_k <= 0 || top_k > experts)
    throw std::invalid_argument(std::string(what) + ": bad shape (rows " + std::to_string(rows) + ", experts " +
                                std::to_string(experts) + ", top_k " + std::to_string(top_k) +
                                "; 1 <= top_k <= experts)");
}

}  // namespace

void route_expert_rows(const float* logits, int32_t stride, int32_t rows, int32_t experts, int32_t top_k,
                       bool renormalize, int32_t* choice, float* weight, cudaStream_t stream) {
  check_shape("route_expert_rows", rows, experts, top_k);
  if (stride < experts)
    throw std::invalid_argument("route_expert_rows: stride " + std::to_string(stride) + " < experts " +
                                std::to_string(experts));
  if (rows == 0) return;
  const int32_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  route_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(logits, stride, rows, experts, top_k, renormalize, choice,
                                                           weight);
  check_launch("route_expert_rows");
}

void group_by_expert(const int32_t* choice, const float* weight, int32_t rows, int32_t top_k, int32_t experts,
                     int32_t* begin, int32_t* grouped_row, int32_t* row_slot, float* row_weight, cudaStream_t stream) {
  check_shape("group_by_expert", rows, experts, top_k);
  group_kernel<<<1, kGroupThreads, 0, stream>>>(choice, weight, rows, top_k, experts, begin, grouped_row, row_slot,
                                                row_weight);
  check_launch("group_by_expert");
}

}  // namespace orzo::cuda
