#include "core/sampling_params.hpp"

#include <cmath>
#include <sstream>

namespace orzo {
namespace {

SamplingProblem problem(const std::string& field, const std::string& label, const std::string& requirement,
                        double value) {
  std::ostringstream message;
  message << label << " must be " << requirement << ", got " << value;
  return {field, message.str()};
}

SamplingProblem problem(const std::string& field, const std::string& requirement, double value) {
  return problem(field, field, requirement, value);
}

}  // namespace

std::optional<SamplingProblem> sampling_problem(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return problem("temperature", "finite and >= 0", p.temperature);
  if (!(p.top_p > 0 && p.top_p <= 1)) return problem("top_p", "in (0, 1]", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return problem("min_p", "in [0, 1]", p.min_p);
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0)
    return problem("repetition_penalty", "finite and > 0", p.repetition_penalty);
  if (!std::isfinite(p.frequency_penalty)) return problem("frequency_penalty", "finite", p.frequency_penalty);
  if (!std::isfinite(p.presence_penalty)) return problem("presence_penalty", "finite", p.presence_penalty);
  if (p.penalty_window < 0) return problem("penalty_window", ">= 0", p.penalty_window);
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
    return problem("top_logprobs", "in [0, " + std::to_string(kMaxTopLogprobs) + "]", p.top_logprobs);
  if (p.prompt_logprobs < -1 || p.prompt_logprobs > kMaxTopLogprobs)
    return problem("prompt_logprobs", "in [0, " + std::to_string(kMaxTopLogprobs) + "], or -1 for none",
                   p.prompt_logprobs);
  for (const auto& [token, bias] : p.logit_bias)
    if (!std::isfinite(bias)) return problem("logit_bias", "logit_bias[" + std::to_string(token) + "]", "finite", bias);
  return std::nullopt;
}

}  // namespace orzo
