#pragma once
// How a request wants its tokens drawn. Part of the register message (session -> batcher)
// and read by the sampler on the last worker; plain data, no CAF here so the sampler stays
// pure. Defaults follow vLLM / OpenAI.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace orzo {

// The most alternatives a request may ask logprobs for: the GPU sampler returns them in
// fixed arrays of this size per row (kernels/cuda/sampling.hpp), and OpenAI allows as many.
inline constexpr int32_t kMaxTopLogprobs = 20;

// What the output must match (structured outputs, grammar/constraint.hpp). What `text` holds
// follows the kind.
struct OutputConstraint {
  enum class Kind : int32_t {
    none,
    regex,        // a regular expression the whole output matches (Python's re.fullmatch)
    json_schema,  // a JSON schema the output, a JSON text, satisfies
    json_object,  // any JSON object (text unused)
    choice,       // one of a list of strings: text is the list as a JSON array
    grammar,      // a GBNF grammar (llama.cpp's), from its rule `root`
    tool_calls,   // calls to offered functions in a chat template's format (grammar/tool_calls.hpp)
  };
  Kind kind = Kind::none;
  std::string text;
  bool strict = false;  // json_schema: OpenAI's strict mode (every object closed, every property required)
};

struct SamplingParams {
  float temperature = 1.0f;          // 0 means greedy (argmax)
  int32_t top_k = 0;                 // <= 0: off
  float top_p = 1.0f;                // 1: off
  float min_p = 0.0f;                // 0: off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;   // 1: off; divides positive logits, multiplies negative ones
  float frequency_penalty = 0.0f;    // subtracts penalty * count of the token in the window
  float presence_penalty = 0.0f;     // subtracts penalty once if the token is in the window
  int32_t penalty_window = 64;       // the penalties look at this many most recent tokens
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> added to its logit
  std::optional<uint64_t> seed;      // same seed, same logits: same tokens
  bool logprobs = false;             // report the sampled token's logprob
  int32_t top_logprobs = 0;          // and this many most likely alternatives (0..kMaxTopLogprobs)
  // >= 0: score the prompt too: each prompt token after the first gets its logprob given the
  // tokens before it, its rank, and this many most likely alternatives (0..kMaxTopLogprobs).
  // -1: off. Scoring needs the logits of every prompt row, so the prefix cache cannot serve it.
  int32_t prompt_logprobs = -1;
  OutputConstraint constraint;       // masks the tokens that would break it; none: off
};

// A field the sampler cannot run with: its name (also the OpenAI parameter's, where the API
// has one) and a message that names it and its value.
struct SamplingProblem {
  std::string field;
  std::string message;
};

// The first field outside what the sampler can run, or none. The one rule: check_request
// (protocol/generation_request.hpp) applies it to every request, and the Sampler asserts it.
std::optional<SamplingProblem> sampling_problem(const SamplingParams& params);

}  // namespace orzo
