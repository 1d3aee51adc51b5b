#pragma once
// batcher -> session: how likely the model found each token of a prompt, for a request whose
// sampling asks prompt_logprobs (scoring, perplexity, lm-evaluation-harness). Positions
// 1 .. prompt length - 1 arrive exactly once, in order, over one or more events, all before
// the request's first TokenEvent. The session hands them on to its client in TextChunks.

#include "protocol/token_event.hpp"
#include "protocol/wire.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace orzo {

struct PromptTokenScore {
  int32_t position = 0;                  // in the prompt; the first token has no score
  int32_t token = 0;
  f32 logprob;                           // given the tokens before it, raw (before any sampling rule)
  int32_t rank = 0;                      // 1 + how many tokens the model found more likely
  std::vector<TopLogprob> top_logprobs;  // prompt_logprobs most likely, most likely first
};

struct PromptScoresEvent {
  std::string request_id;
  std::vector<PromptTokenScore> scores;  // consecutive positions
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PromptTokenScore& x) {
  return f(caf::meta::type_name("prompt_token_score"), x.position, x.token, x.logprob, x.rank, x.top_logprobs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PromptScoresEvent& x) {
  return f(caf::meta::type_name("prompt_scores_event"), x.request_id, x.scores);
}

}  // namespace orzo
