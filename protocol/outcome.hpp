#pragma once
// How a request ended and what it cost: the vocabulary of every terminal event (the batcher's
// FinishedEvent to its session, the session's Completion to its client) and of the counters
// that /metrics shows per reason.

#include <caf/meta/type_name.hpp>

#include <cstdint>

namespace orzo {

enum class FinishReason : uint8_t {
  eos,        // the model sampled an end-of-sequence token
  stop,       // a stop token id (or, at the session, a stop string)
  length,     // max_tokens or the context length
  cancelled,  // the session asked to stop, or went away
  error,      // see ErrorCode
};

enum class ErrorCode : uint8_t {
  none,
  overloaded,       // the waiting queue is full: retry later
  invalid_request,  // the request cannot be served as asked (see message)
  step_failed,      // a forward step that held this request failed
  worker_lost,      // a worker died; the model is unhealthy until it is back
  unavailable,      // the model is not serving (unhealthy, shutting down)
  batcher_lost,     // the session lost its batcher
};

inline const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::eos: return "eos";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "unknown";
}

inline const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::none: return "none";
    case ErrorCode::overloaded: return "overloaded";
    case ErrorCode::invalid_request: return "invalid_request";
    case ErrorCode::step_failed: return "step_failed";
    case ErrorCode::worker_lost: return "worker_lost";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::batcher_lost: return "batcher_lost";
  }
  return "unknown";
}

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;     // prompt tokens whose KV came from the prefix cache
  int32_t generated_tokens = 0;
  int64_t queue_us = 0;          // admission to the first step that ran it, in microseconds
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Usage& x) {
  return f(caf::meta::type_name("usage"), x.prompt_tokens, x.cached_tokens, x.generated_tokens, x.queue_us);
}

}  // namespace orzo
