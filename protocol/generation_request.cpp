#include "protocol/generation_request.hpp"

#include "grammar/constraint.hpp"

namespace orzo {
namespace {

bool in_vocabulary(int32_t id, const RequestBounds& bounds) { return id >= 0 && id < bounds.vocab_size; }

std::string outside_vocabulary(const std::string& what, int32_t id, const RequestBounds& bounds) {
  return what + " token id " + std::to_string(id) + " is outside the vocabulary (size " +
         std::to_string(bounds.vocab_size) + ")";
}

}  // namespace

std::optional<RequestProblem> check_request(const GenerationRequest& request, const RequestBounds& bounds,
                                            std::string_view prompt_param) {
  const std::string prompt(prompt_param);
  const auto length = static_cast<int64_t>(request.prompt.size());
  const GenerationLimits& limits = request.limits;
  if (request.prompt.empty()) return RequestProblem{prompt, "the prompt is empty", {}};
  for (const int32_t id : request.prompt)
    if (!in_vocabulary(id, bounds)) return RequestProblem{prompt, outside_vocabulary("prompt", id, bounds), {}};
  // Checked before max_tokens: a chat's default max_tokens is what the prompt leaves of the
  // context, so a prompt that fills it is the prompt's fault.
  // A prompt that is only scored may fill the context; one that generates must leave room.
  const bool only_scores = limits.max_tokens == 0 && request.sampling.prompt_logprobs >= 0;
  if (length + (only_scores ? 0 : 1) > bounds.max_model_len)
    return RequestProblem{prompt,
                          "this model's maximum context length is " + std::to_string(bounds.max_model_len) +
                              " tokens, and the prompt has " + std::to_string(length),
                          "context_length_exceeded"};
  // Scoring a prompt needs no generated token (OpenAI's echo with max_tokens 0).
  const int32_t least = request.sampling.prompt_logprobs >= 0 ? 0 : 1;
  if (limits.max_tokens < least)
    return RequestProblem{"max_tokens",
                          "max_tokens must be at least " + std::to_string(least) + ", got " +
                              std::to_string(limits.max_tokens),
                          {}};
  if (limits.min_tokens < 0)
    return RequestProblem{"min_tokens", "min_tokens must be at least 0, got " + std::to_string(limits.min_tokens), {}};
  if (limits.min_tokens > limits.max_tokens)
    return RequestProblem{"min_tokens",
                          "min_tokens (" + std::to_string(limits.min_tokens) + ") must not exceed max_tokens (" +
                              std::to_string(limits.max_tokens) + ")",
                          {}};
  if (length + limits.max_tokens > bounds.max_model_len)
    return RequestProblem{"max_tokens",
                          "prompt (" + std::to_string(length) + " tokens) + max_tokens (" +
                              std::to_string(limits.max_tokens) + ") exceeds the context length " +
                              std::to_string(bounds.max_model_len),
                          "context_length_exceeded"};
  if (auto problem = sampling_problem(request.sampling)) return RequestProblem{problem->field, problem->message, {}};
  for (const auto& bias : request.sampling.logit_bias)
    if (!in_vocabulary(bias.first, bounds))
      return RequestProblem{"logit_bias", outside_vocabulary("logit_bias", bias.first, bounds), {}};
  if (auto why = grammar::constraint_problem(request.sampling.constraint)) return RequestProblem{"constraint", *why, {}};
  return std::nullopt;
}

}  // namespace orzo
