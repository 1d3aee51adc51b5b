#pragma once
// The one exception type of the chat-template interpreter. Every failure — a syntax error, a
// construct the interpreter does not implement, a runtime type error, raise_exception() called
// by the template, a resource limit — surfaces as this type, so callers (and the fuzzer) have a
// single thing to catch and anything else escaping is a bug.

#include <stdexcept>
#include <string>

namespace orzo {

class ChatTemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The template called raise_exception(message): the conversation is one the template refuses
// (e.g. roles that do not alternate), not a fault of the template. what() is the message verbatim.
class ChatTemplateRaised : public ChatTemplateError {
 public:
  using ChatTemplateError::ChatTemplateError;
};

}  // namespace orzo
