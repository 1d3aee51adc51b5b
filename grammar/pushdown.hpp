#pragma once
// A context-free language (grammar.hpp) as a pushdown automaton over bytes: what a grammar
// becomes when a rule reaches itself (JSON's value through objects and arrays, a recursive
// $ref, a GBNF grammar), so output nests as deep as it wants rather than as deep as an
// unrolling went.
//
// Each rule is a DFA over bytes and calls of rules (nfa.hpp), trimmed so that every state can
// still finish its rule. A configuration is the set of stacks the output so far may have left
// (more than one where the grammar is ambiguous): each stack holds the states to return to in
// the rules in progress, and on top the state reading the next byte. Configurations are
// interned as they are met, so a state of this automaton is an int32 like a ByteDfa's, and a
// step from a configuration is computed once; masks are then cached per configuration
// (constraint.hpp) as per DFA state. Every stack of a configuration can reach the end, so a
// masked draw never paints itself into a corner. Left recursion is refused: it would push
// rules forever without reading a byte.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.hpp"

namespace orzo::grammar {

class Pushdown {
 public:
  static constexpr int32_t kDead = -1;
  // Rules in progress at once: output nesting deeper is not generated.
  static constexpr size_t kMaxDepth = 1000;
  // Stacks in a configuration (ambiguity): past it the rest are dropped, which can only narrow
  // what is allowed, never lead into a dead end.
  static constexpr size_t kMaxStacks = 256;
  // Configurations interned: past it a new one is no state (kDead), which bounds the memory a
  // compiled grammar can hold however long its outputs run (the constraint cache retires a
  // compiled grammar long before, constraint.hpp).
  static constexpr size_t kMaxConfigurations = 200000;

  // grammar: as Grammar::inlined() leaves it. GrammarError when it allows nothing, is left
  // recursive, or its automata grow past ByteDfa's limits.
  static std::unique_ptr<Pushdown> compile(const Grammar& grammar);

  int32_t start() const { return 0; }
  // Safe from many threads; steps go through a Walk.
  bool accepting(int32_t configuration) const;
  size_t configurations() const;

  // Steps under one lock, for a walk of many (a vocabulary's trie).
  class Walk {
   public:
    explicit Walk(const Pushdown& p) : p_(p), lock_(p.mutex_) {}
    int32_t step(int32_t configuration, uint8_t byte) const {
      if (configuration == kDead) return kDead;
      const int32_t known = p_.moves_[static_cast<size_t>(configuration) * p_.classes_ + p_.byte_class_[byte]];
      return known != kUnknown ? known : p_.step_locked(configuration, byte);
    }

   private:
    const Pushdown& p_;
    std::lock_guard<std::mutex> lock_;
  };

 private:
  static constexpr int32_t kUnknown = -2;  // a step not taken yet
  struct Call {
    int32_t rule, to;
  };
  struct KeyHash {
    size_t operator()(const std::vector<int32_t>& key) const;
  };
  using Stack = std::vector<int32_t>;

  int32_t step_locked(int32_t configuration, uint8_t byte) const;
  int32_t intern(std::vector<Stack>& stacks) const;

  std::array<uint8_t, 256> byte_class_{};
  size_t classes_ = 1;
  // The rules' DFA states, numbered across rules.
  std::vector<int32_t> next_;            // states x classes: the state after a byte, or kDead
  std::vector<std::vector<Call>> calls_;  // per state: a rule it may call, and where that returns to
  std::vector<uint8_t> accept_;           // its rule may end here
  std::vector<uint8_t> can_end_;          // ... here, or after rules that may be empty
  std::vector<int32_t> rule_start_;

  mutable std::mutex mutex_;
  mutable std::vector<std::vector<int32_t>> keys_;  // per configuration: its stacks, each its size then its states
  mutable std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> ids_;
  mutable std::vector<uint8_t> accepting_;
  mutable std::vector<int32_t> moves_;  // configurations x classes: the step, kUnknown until taken
};

}  // namespace orzo::grammar
