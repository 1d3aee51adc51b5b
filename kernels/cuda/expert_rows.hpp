#pragma once
// Moving rows in and out of a Mixture-of-Experts layer's grouped order (group_by_expert):
// gather_rows copies each choice's input row into its expert's group, so that each expert is
// one GEMM over contiguous rows; combine_experts adds each row's expert outputs, weighted, in
// expert order, with Qwen2-MoE's shared expert scaled by its sigmoid gate. Twin: the loops of
// CpuBackend::expert_block, which copy each expert's rows out and add p · y back row by row.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

// dst[i, :] = src[index[i], :] for i < count; src and dst rows are `width` elements of `elem`.
void gather_rows(Elem elem, const void* src, const int32_t* index, int32_t count, int32_t width, void* dst,
                 cudaStream_t stream);

struct ExpertCombineArgs {
  const float* expert_out = nullptr;  // [rows * top_k, hidden]: the experts' outputs, in grouped order
  const int32_t* row_slot = nullptr;  // [rows, top_k]: where row r's outputs are, in expert order
  const float* row_weight = nullptr;  // [rows, top_k]: and their weights (group_by_expert)
  int32_t rows = 0, top_k = 0, hidden = 0;
  const float* shared = nullptr;       // [rows, hidden]: the shared expert's output (Qwen2-MoE), or null
  const float* shared_gate = nullptr;  // its gate's logit for row r at shared_gate[r * gate_stride]
  int32_t gate_stride = 1;
  float* out = nullptr;                // [rows, hidden]
  bool accumulate = true;              // add to what out holds (the residual), or overwrite it
};

// out[r, :] (+)= sigmoid(shared_gate[r]) · shared[r, :] + Σ_j row_weight[r, j] · expert_out[row_slot[r, j], :],
// summed in that order, as CpuBackend::expert_block sums.
void combine_experts(const ExpertCombineArgs& args, cudaStream_t stream);

}  // namespace orzo::cuda
