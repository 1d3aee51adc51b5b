#pragma once
// The host half of GPU sampling: each logit row's DrawPlan (core/draw_plan.hpp) packed
// into the flat arrays the sampling kernel reads (kernels/cuda/sampling.hpp), and the
// kernel's answers turned back into SampleResults. Pure host code.
#include <cstdint>
#include <vector>

#include "core/draw_plan.hpp"
#include "kernels/cuda/sampling.hpp"
#include "runtime/sampler.hpp"

namespace orzo::cuda {

struct PackedDraws {
  std::vector<DeviceDraw> draws;     // one per plan
  std::vector<int32_t> recent;       // every row's penalty window, back to back
  std::vector<int32_t> bias_tokens;  // every row's logit bias inside [0, vocab), back to back
  std::vector<float> bias_values;
  std::vector<uint64_t> masks;       // every constrained row's mask, back to back

  void pack(const std::vector<DrawPlan>& plans, int32_t vocab);
};

// What the CPU Sampler reports for the same plan: for a draw, the logprob when the params ask
// for any, and top_logprobs of them (no more than the vocabulary holds); for a score
// (plan.score_token), the logprob, the rank and prompt_logprobs alternatives.
SampleResult to_sample_result(const DeviceSample& sample, const DrawPlan& plan, int32_t vocab);

}  // namespace orzo::cuda
