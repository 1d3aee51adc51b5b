#pragma once
// session -> client: the request's output as text. A client actor (in this process or on
// another node) or a callback receives TextChunks in order, then exactly one Completion.

#include "protocol/outcome.hpp"
#include "protocol/prompt_scores.hpp"
#include "protocol/token_event.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace orzo {

struct TextChunk {
  std::string request_id;
  std::string text;                  // whole UTF-8 characters; may be empty while text is held back
  std::vector<int32_t> tokens;       // the tokens this chunk covers
  std::vector<f32> logprobs;         // per token, when asked
  std::vector<std::vector<TopLogprob>> top_logprobs;  // per token, when asked
  // Scores of prompt tokens, when sampling.prompt_logprobs asked; in position order, all in
  // chunks before the first generated token's.
  std::vector<PromptTokenScore> prompt_scores;
};

struct Completion {
  std::string request_id;
  FinishReason reason = FinishReason::eos;
  ErrorCode error = ErrorCode::none;
  std::string message;
  Usage usage;
  std::string stop;                  // the stop string that ended it, if one did
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TextChunk& x) {
  return f(caf::meta::type_name("text_chunk"), x.request_id, x.text, x.tokens, x.logprobs, x.top_logprobs,
           x.prompt_scores);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Completion& x) {
  return f(caf::meta::type_name("completion"), x.request_id, x.reason, x.error, x.message, x.usage, x.stop);
}

}  // namespace orzo
