#pragma once
// What a session asks of the batcher (the `register` message): the prompt as token ids,
// how to sample, and when to end. Text never reaches the batcher. Also the rules every such
// request is held to (check_request), whoever sends it.

#include "core/sampling_params.hpp"
#include "protocol/wire.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orzo {

struct GenerationLimits {
  int32_t max_tokens = 16;              // generated tokens at most ("length")
  int32_t min_tokens = 0;               // EOS and stop ids cannot end the request before this many
  std::vector<int32_t> stop_token_ids;  // end the request ("stop"), in addition to the model's EOS
  bool ignore_eos = false;              // keep going past EOS (benchmarks)
};

struct GenerationRequest {
  std::string id;                  // unique among the batcher's live requests
  std::vector<int32_t> prompt;     // token ids, BOS included when the model wants one
  SamplingParams sampling;
  GenerationLimits limits;
  int32_t priority = 0;            // lower is served first, when the batcher runs by priority
};

// What the model allows any request.
struct RequestBounds {
  int32_t max_model_len = 0;  // prompt + generated tokens at most
  int32_t vocab_size = 0;     // token ids lie in [0, vocab_size)
};

// Why a request cannot run, as an OpenAI error names it: the parameter at fault, a message
// for the client, and a code where OpenAI has one ("context_length_exceeded").
struct RequestProblem {
  std::string param;
  std::string message;
  std::string code;
};

// The first rule `request` breaks, or none: a prompt that is not empty, whose ids lie in the
// vocabulary and that leaves room in the context; max_tokens >= 1 (0 for a request that only
// scores its prompt: sampling.prompt_logprobs >= 0); min_tokens in [0,
// max_tokens]; prompt + max_tokens inside the context; sampling the sampler can run
// (sampling_problem) with logit_bias ids in the vocabulary; an output constraint that
// compiles (grammar::constraint_problem). The one owner of these rules:
// front ends call it before they start anything (the HTTP server's 400), and the batcher
// calls it for every client. `prompt_param` is what the client called the prompt
// ("messages" for a chat).
std::optional<RequestProblem> check_request(const GenerationRequest& request, const RequestBounds& bounds,
                                            std::string_view prompt_param = "prompt");

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, OutputConstraint& x) {
  auto kind = static_cast<int32_t>(x.kind);
  return f(caf::meta::type_name("output_constraint"), kind, x.text, x.strict, caf::meta::load_callback([&]() -> caf::error {
             if (kind < 0 || kind > static_cast<int32_t>(OutputConstraint::Kind::tool_calls)) return caf::sec::invalid_argument;
             x.kind = static_cast<OutputConstraint::Kind>(kind);
             return caf::none;
           }));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingParams& x) {
  float_ref temperature{x.temperature}, top_p{x.top_p}, min_p{x.min_p},
      repetition{x.repetition_penalty}, frequency{x.frequency_penalty}, presence{x.presence_penalty};
  // logit_bias and seed change shape on the wire: CAF 0.17 knows neither std::pair of a
  // float nor std::optional.
  std::vector<int32_t> bias_tokens;
  std::vector<f32> bias_values;
  bool has_seed = x.seed.has_value();
  uint64_t seed = x.seed.value_or(0);
  if constexpr (Inspector::reads_state) {
    for (const auto& [token, value] : x.logit_bias) {
      bias_tokens.push_back(token);
      bias_values.push_back(f32{value});
    }
  }
  return f(caf::meta::type_name("sampling_params"), temperature, x.top_k, top_p, min_p, repetition,
           frequency, presence, x.penalty_window, bias_tokens, bias_values, has_seed, seed, x.logprobs,
           x.top_logprobs, x.prompt_logprobs, x.constraint, caf::meta::load_callback([&]() -> caf::error {
             if (bias_tokens.size() != bias_values.size()) return caf::sec::invalid_argument;
             x.logit_bias.clear();
             for (size_t i = 0; i < bias_tokens.size(); ++i) x.logit_bias.emplace_back(bias_tokens[i], bias_values[i].v);
             x.seed = has_seed ? std::optional<uint64_t>{seed} : std::nullopt;
             return caf::none;
           }));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GenerationLimits& x) {
  return f(caf::meta::type_name("generation_limits"), x.max_tokens, x.min_tokens, x.stop_token_ids,
           x.ignore_eos);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GenerationRequest& x) {
  return f(caf::meta::type_name("generation_request"), x.id, x.prompt, x.sampling, x.limits, x.priority);
}

}  // namespace orzo
