#pragma once
// What a device sampler needs to draw one logit row as the CPU Sampler would: the request's
// params, the Philox (seed, step) of this draw, and the tokens its penalties count. The
// BatchSampler makes plans (runtime/batch_sampler.hpp); a backend that samples on its device
// consumes them (runtime/layer_backend.hpp).
#include <cstddef>
#include <cstdint>

#include "core/sampling_params.hpp"

namespace orzo {

struct DrawPlan {
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;
  uint64_t step = 0;
  const int32_t* recent = nullptr;  // the penalty window, oldest first; valid until the next plan
  size_t n_recent = 0;
  // >= 0: draw nothing, score this token (a prompt token) as Sampler::score does, with
  // params->prompt_logprobs alternatives.
  int32_t score_token = -1;
  // An output constraint's mask: token i may be drawn when bit i % 64 of word i / 64 is set;
  // null: any token. Valid until the draws are committed (runtime/batch_sampler.hpp).
  const uint64_t* allowed = nullptr;
};

}  // namespace orzo
