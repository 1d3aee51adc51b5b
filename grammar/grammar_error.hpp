#pragma once
// A constraint (regular expression, JSON schema, choice list, grammar) that cannot be
// compiled: what() says why, naming the construct at fault, so a client's 400 can point at it.
#include <stdexcept>
#include <string>

namespace orzo::grammar {

struct GrammarError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace orzo::grammar
