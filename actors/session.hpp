#pragma once
// A session: one request's own actor. It registers the prompt's ids with the batcher, turns
// the tokens that come back into text (incremental detokenizer, stop strings with hold-back)
// and hands the text to its client, ending with exactly one Completion.
//
// The front end tokenizes, the session detokenizes: the front end (the HTTP server, the CLI,
// an application through Engine::tokenize) needs the prompt's length before anything starts,
// for OpenAI's defaults, the context-length refusal and usage; the text coming back depends
// on the stream of tokens, which only the session sees.

#include "protocol/interfaces.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace caf {
class actor_system;
}

namespace orzo {

class Tokenizer;

struct SessionRequest {
  std::string id;                     // unique among the batcher's live requests
  std::vector<int32_t> prompt_ids;    // BOS included when the model wants one
  SamplingParams sampling;
  GenerationLimits limits;
  int32_t priority = 0;
  std::vector<std::string> stop;      // stop strings: the output ends before the first one
  bool include_stop = false;          // ... or just after it
  bool skip_special_tokens = true;    // leave special tokens out of the text
};

// For applications that take the output in a callback rather than an actor. Both run on the
// session's thread, one at a time, in order.
struct SessionCallbacks {
  std::function<void(TextChunk&)> on_text;
  std::function<void(Completion&)> on_done;
};

// `tokenizer` may be null when the request wants no text (chunks then carry tokens only).
// The client receives every chunk, then one Completion.
session_actor spawn_session(caf::actor_system& sys, batcher_actor batcher, std::shared_ptr<const Tokenizer> tokenizer,
                            SessionRequest request, client_actor client);
session_actor spawn_session(caf::actor_system& sys, batcher_actor batcher, std::shared_ptr<const Tokenizer> tokenizer,
                            SessionRequest request, SessionCallbacks callbacks);

}  // namespace orzo
