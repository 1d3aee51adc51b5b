#pragma once
// The one exception type for a model that cannot be loaded: a bad file, a missing or
// misshapen tensor, an unsupported architecture. Its message names the file (and the
// tensor or key) so a user can act on it without a debugger.
#include <stdexcept>
#include <string>

namespace orzo {

class LoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace orzo
