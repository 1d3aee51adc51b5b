#pragma once
// batcher -> session, once per generated token, in order.

#include "protocol/wire.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace orzo {

struct TopLogprob {
  int32_t token = 0;
  f32 logprob;
};

struct TokenEvent {
  std::string request_id;
  int32_t token = 0;
  int32_t index = 0;                // position in the output: 0 for the first generated token
  f32 logprob;                      // when the request asked for logprobs
  std::vector<TopLogprob> top_logprobs;  // most likely first, when asked
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TopLogprob& x) {
  return f(caf::meta::type_name("top_logprob"), x.token, x.logprob);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  return f(caf::meta::type_name("token_event"), x.request_id, x.token, x.index, x.logprob, x.top_logprobs);
}

}  // namespace orzo
