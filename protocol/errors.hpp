#pragma once
// orzo's errors as caf::error values (the replies of workers, the reasons of exits), in
// the category orzo_error_category, with the ErrorCode as the code and a message as context.

#include "protocol/atoms.hpp"
#include "protocol/outcome.hpp"

#include <caf/error.hpp>
#include <caf/make_message.hpp>

#include <string>

namespace orzo {

inline caf::error make_orzo_error(ErrorCode code, std::string message) {
  return caf::error(static_cast<uint8_t>(code), orzo_error_category, caf::make_message(std::move(message)));
}

// The message of an orzo error (empty for CAF's own errors).
inline std::string error_message(const caf::error& e) {
  const auto& context = e.context();
  if (context.size() == 1 && context.match_element<std::string>(0)) return context.get_as<std::string>(0);
  return {};
}

// The ErrorCode inside an orzo error; anything else (a CAF error: timeout, receiver down)
// means the stage that should have answered is gone.
inline ErrorCode error_code_of(const caf::error& e) {
  if (e.category() == orzo_error_category) return static_cast<ErrorCode>(e.code());
  return ErrorCode::worker_lost;
}

}  // namespace orzo
