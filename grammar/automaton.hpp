#pragma once
// What a constraint compiles to: a byte DFA when its language is regular (byte_dfa.hpp), a
// pushdown automaton when a rule reaches itself (pushdown.hpp). Either way a state is an
// int32 and kDead is none, so a vocabulary's masks (constraint.hpp) are cached per state
// alike. Copies share the pushdown automaton and the configurations it has met.
#include <cstdint>
#include <memory>
#include <string>

#include "grammar/byte_dfa.hpp"
#include "grammar/grammar.hpp"
#include "grammar/pushdown.hpp"

namespace orzo::grammar {

class Automaton {
 public:
  static constexpr int32_t kDead = -1;
  static_assert(ByteDfa::kDead == kDead && Pushdown::kDead == kDead);

  // GrammarError when the language is empty, the grammar left-recursive, or the automaton too
  // large.
  static Automaton compile(const Grammar& grammar);
  static Automaton compile(const RegexPtr& regex) { return compile(regular_grammar(regex)); }

  int32_t start() const { return 0; }
  bool accepting(int32_t state) const {
    if (state == kDead) return false;
    return dfa_ ? dfa_->accepting(state) : pushdown_->accepting(state);
  }
  // The state after `bytes` from `state`, or kDead.
  int32_t walk(int32_t state, const std::string& bytes) const;
  bool matches(const std::string& bytes) const { return accepting(walk(start(), bytes)); }

  // fn(step), step(state, byte) being the cheapest stepping for many steps in a row (for the
  // pushdown automaton, under one lock).
  template <class Fn>
  void walking(Fn&& fn) const {
    if (dfa_) {
      const ByteDfa& dfa = *dfa_;
      fn([&dfa](int32_t s, uint8_t b) { return dfa.step(s, b); });
    } else {
      const Pushdown::Walk walk(*pushdown_);
      fn([&walk](int32_t s, uint8_t b) { return walk.step(s, b); });
    }
  }

  const ByteDfa* dfa() const { return dfa_.get(); }            // when regular
  const Pushdown* pushdown() const { return pushdown_.get(); }  // when not

 private:
  std::shared_ptr<const ByteDfa> dfa_;
  std::shared_ptr<const Pushdown> pushdown_;
};

}  // namespace orzo::grammar
