#pragma once
// A Mixture-of-Experts router's decision for a step: each row's experts and weights (softmax
// over every expert's logit, the top k kept, renormalized to sum to 1 where the model says),
// and the same choices grouped by expert, so that each expert's weights are read once for all
// the rows that chose it.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace orzo::cpu {

struct ExpertRouting {
  int64_t experts = 0, top_k = 0;
  // Row r's choices are [r·top_k, (r+1)·top_k), best first: expert ids, their weights, and
  // where each sits in the grouping below.
  std::vector<int32_t> choice;
  std::vector<float> weight;
  std::vector<int32_t> slot;
  // By expert: the choices of expert e are [begin[e], begin[e+1]) of `rows` (which rows, in
  // row order) and `row_weight` (their weights).
  std::vector<int32_t> begin, rows;
  std::vector<float> row_weight;

  int64_t rows_of(int64_t e) const { return begin[static_cast<size_t>(e) + 1] - begin[static_cast<size_t>(e)]; }
  // How many experts at least one row chose.
  int64_t active_experts() const;
};

// `logits`: [rows, experts] row-major. Probabilities are computed in f32 as transformers
// does (softmax, then topk; ties keep the lower expert id first), and the chosen ones divided
// by their sum where `renormalize`.
void route_experts(const float* logits, int64_t rows, int64_t experts, int64_t top_k, bool renormalize,
                   ExpertRouting& out);

}  // namespace orzo::cpu
