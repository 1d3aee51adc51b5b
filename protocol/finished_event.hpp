#pragma once
// batcher -> session, exactly once per request, after its last token: why it ended and
// what it cost. Also what a session reports to its client at the end.

#include "protocol/outcome.hpp"

#include <caf/meta/type_name.hpp>

#include <string>

namespace orzo {

struct FinishedEvent {
  std::string request_id;
  FinishReason reason = FinishReason::eos;
  ErrorCode error = ErrorCode::none;
  std::string message;           // human-readable detail for errors
  Usage usage;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FinishedEvent& x) {
  return f(caf::meta::type_name("finished_event"), x.request_id, x.reason, x.error, x.message, x.usage);
}

}  // namespace orzo
