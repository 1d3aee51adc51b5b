#pragma once
// A Mixture-of-Experts router's decision on the GPU, in two kernels. route_expert_rows: each
// row's softmax over every expert's logit in f32, its top k (ties to the lower expert id) and
// their weights, renormalized to sum to 1 where the model says. group_by_expert: the same
// choices grouped by expert, so that each expert runs once over all the rows that chose it.
// Twin: cpu::route_experts (kernels/cpu/expert_routing.hpp), which does both.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace orzo::cuda {

// logits: row r's experts at logits[r * stride, r * stride + experts) f32 (stride >= experts:
// the router's GEMM may carry more columns, as Qwen2-MoE's shared-expert gate).
// choice, weight: [rows, top_k], row r's experts best first and their weights, as
// cpu::ExpertRouting::choice and ::weight. 1 <= top_k <= experts.
void route_expert_rows(const float* logits, int32_t stride, int32_t rows, int32_t experts, int32_t top_k,
                       bool renormalize, int32_t* choice, float* weight, cudaStream_t stream);

// From choice and weight (route_expert_rows; distinct experts within a row):
//   begin: [experts + 1], expert e's choices are [begin[e], begin[e + 1]) of the grouped order
//     (cpu::ExpertRouting::begin);
//   grouped_row: [rows * top_k], which row each grouped choice is, in row order within an
//     expert (cpu::ExpertRouting::rows);
//   row_slot, row_weight: [rows, top_k], each row's choices in increasing expert order: where in
//     the grouped order its expert's output for the row sits, and its weight. Adding a row's
//     outputs in this order is the CPU's order (expert by expert), whatever else is in the step.
// One block: it reads every choice once per expert, which is cheap next to the experts' GEMMs.
void group_by_expert(const int32_t* choice, const float* weight, int32_t rows, int32_t top_k, int32_t experts,
                     int32_t* begin, int32_t* grouped_row, int32_t* row_slot, float* row_weight, cudaStream_t stream);

}  // namespace orzo::cuda
