#pragma once
// A regular language (regex.hpp) as a deterministic automaton over bytes, the unit tokens
// are made of (a token may end inside a character). Built by Thompson's construction and the
// subset construction, then trimmed: a state that cannot reach acceptance is no state at all,
// so every live state can still end well, and a token mask never leads into a dead end.
#include <cstdint>
#include <vector>

#include "grammar/regex.hpp"

namespace orzo::grammar {

class ByteDfa {
 public:
  static constexpr int32_t kDead = -1;
  // Limits on the work a constraint may cost; past them, GrammarError says it is too large.
  // The states alone did not bound the subset construction's time: (.?){1000}a{1000} took
  // 19 s to reach 30,000 states of ~2,000 NFA states each. kMaxWork (NFA states visited,
  // ~7 ns each on a Zen 4) refuses it in 0.5 s, and is twice what a schema of 40 optional
  // properties takes (35 M, the most of the realistic schemas measured).
  static constexpr size_t kMaxNfaStates = 400000;
  static constexpr size_t kMaxDfaStates = 30000;
  static constexpr size_t kMaxWork = size_t{64} << 20;

  // GrammarError when the language is empty or the automaton grows past the limits.
  static ByteDfa compile(const RegexPtr& regex);

  int32_t start() const { return 0; }
  int32_t step(int32_t state, uint8_t byte) const {
    return next_[static_cast<size_t>(state) * classes_ + byte_class_[byte]];
  }
  bool accepting(int32_t state) const { return accepting_[static_cast<size_t>(state)] != 0; }
  // A state from which some byte leads on (else only the end may follow).
  bool continues(int32_t state) const { return continues_[static_cast<size_t>(state)] != 0; }
  size_t states() const { return accepting_.size(); }

  // The state after `bytes` from `state`, or kDead.
  int32_t walk(int32_t state, const std::string& bytes) const {
    for (const char c : bytes) {
      if (state == kDead) break;
      state = step(state, static_cast<uint8_t>(c));
    }
    return state;
  }
  bool matches(const std::string& bytes) const {
    const int32_t s = walk(start(), bytes);
    return s != kDead && accepting(s);
  }

 private:
  std::vector<uint8_t> byte_class_ = std::vector<uint8_t>(256, 0);
  size_t classes_ = 1;
  std::vector<int32_t> next_;  // states x classes
  std::vector<uint8_t> accepting_;
  std::vector<uint8_t> continues_;
};

}  // namespace orzo::grammar
