#include "runtime/cuda/draw_packing.hpp"

#include <algorithm>

namespace orzo::cuda {

void PackedDraws::pack(const std::vector<DrawPlan>& plans, int32_t vocab) {
  draws.clear();
  recent.clear();
  bias_tokens.clear();
  bias_values.clear();
  masks.clear();
  const size_t mask_words = (static_cast<size_t>(vocab) + 63) / 64;
  for (const auto& plan : plans) {
    const SamplingParams& p = *plan.params;
    DeviceDraw d;
    if (plan.score_token >= 0) {
      d.score_token = plan.score_token;
      d.logprobs = 1;
      d.top_logprobs = std::max(p.prompt_logprobs, 0);
      d.recent_offset = static_cast<int32_t>(recent.size());
      d.bias_offset = static_cast<int32_t>(bias_tokens.size());
      draws.push_back(d);
      continue;
    }
    d.temperature = p.temperature;
    d.top_k = p.top_k;
    d.top_p = p.top_p;
    d.min_p = p.min_p;
    d.repetition_penalty = p.repetition_penalty;
    d.frequency_penalty = p.frequency_penalty;
    d.presence_penalty = p.presence_penalty;
    d.seed = plan.seed;
    d.step = plan.step;
    d.recent_offset = static_cast<int32_t>(recent.size());
    d.recent_count = static_cast<int32_t>(plan.n_recent);
    recent.insert(recent.end(), plan.recent, plan.recent + plan.n_recent);
    d.bias_offset = static_cast<int32_t>(bias_tokens.size());
    // The CPU sampler skips ids outside the vocabulary; the kernel is never shown them.
    for (const auto& [token, value] : p.logit_bias) {
      if (token < 0 || token >= vocab) continue;
      bias_tokens.push_back(token);
      bias_values.push_back(value);
    }
    d.bias_count = static_cast<int32_t>(bias_tokens.size()) - d.bias_offset;
    d.logprobs = p.logprobs ? 1 : 0;
    d.top_logprobs = p.top_logprobs;
    if (plan.allowed) {
      d.mask_offset = static_cast<int32_t>(masks.size());
      masks.insert(masks.end(), plan.allowed, plan.allowed + mask_words);
    }
    draws.push_back(d);
  }
}

SampleResult to_sample_result(const DeviceSample& sample, const DrawPlan& plan, int32_t vocab) {
  const SamplingParams& params = *plan.params;
  const bool scored = plan.score_token >= 0;
  SampleResult r{};
  r.token = sample.token;
  if (scored || params.logprobs || params.top_logprobs > 0) r.logprob = sample.logprob;
  if (scored) r.rank = sample.rank;
  const int32_t top = scored ? std::max(params.prompt_logprobs, 0) : params.top_logprobs;
  for (int32_t i = 0; i < top && i < kMaxTopLogprobs && i < vocab; ++i)
    r.top_logprobs.push_back(TokenLogprob{sample.top_tokens[i], sample.top_logprobs[i]});
  return r;
}

}  // namespace orzo::cuda
