#pragma once
// Resource limits of one render. Chat templates come from model files, so a hostile one must not
// be able to hang the server or exhaust its memory: every evaluation step and every string or
// container the interpreter builds is charged here, and going over a limit throws
// ChatTemplateError instead.

#include <cstddef>
#include <cstdint>
#include <string>

#include "chat_template/chat_template_error.hpp"

namespace orzo::jinja {

// Going over a RenderLimits bound. Distinct so that nothing that defers errors (lazy filters)
// can swallow it.
class LimitExceeded : public ChatTemplateError {
 public:
  using ChatTemplateError::ChatTemplateError;
};

struct RenderLimits {
  uint64_t max_steps = 10'000'000;       // evaluation steps, the bound on a render's CPU time; each container element and 64 string bytes built count one
  size_t max_string_bytes = 64u << 20;   // largest string (the output included)
  size_t max_list_items = 1u << 20;      // largest list or dict
  int max_call_depth = 64;               // nested macro calls
};

class Budget {
 public:
  explicit Budget(const RenderLimits& limits) : limits_(limits) {}

  const RenderLimits& limits() const { return limits_; }

  void charge(uint64_t steps) {
    steps_ += steps;
    if (steps_ > limits_.max_steps) {
      throw LimitExceeded("template exceeded its budget of " + std::to_string(limits_.max_steps) + " evaluation steps");
    }
  }
  // Call before building a string of `bytes` bytes.
  void string_of(size_t bytes) {
    if (bytes > limits_.max_string_bytes) {
      throw LimitExceeded("template built a string over the limit of " + std::to_string(limits_.max_string_bytes) + " bytes");
    }
    charge(bytes / 64);
  }
  // Call before appending `added` bytes to a string that then holds `total`.
  void append_of(size_t total, size_t added) {
    if (total > limits_.max_string_bytes) string_of(total);
    charge(added / 64);
  }
  // Call before building a list or dict of `items` entries.
  void list_of(size_t items) {
    if (items > limits_.max_list_items) {
      throw LimitExceeded("template built a list over the limit of " + std::to_string(limits_.max_list_items) + " items");
    }
    charge(items);
  }

 private:
  RenderLimits limits_;
  uint64_t steps_ = 0;
};

}  // namespace orzo::jinja
