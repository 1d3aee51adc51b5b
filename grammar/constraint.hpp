#pragma once
// What an output must match, compiled against a model's vocabulary into the set of tokens
// allowed after each prefix: the sampler masks every other token (runtime/sampler.hpp).
//
// A constraint is an automaton over the output's bytes (automaton.hpp: a DFA, or a pushdown
// automaton for grammars that recur). After a prefix the automaton is in some state; the
// tokens allowed there are those whose bytes keep it alive, found by walking the
// vocabulary's trie, once per state and then cached; EOS is allowed exactly where the output
// may end. Since every live state can still reach an end, a masked draw never paints itself
// into a corner.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/sampling_params.hpp"
#include "core/token_mask.hpp"
#include "grammar/automaton.hpp"
#include "grammar/vocabulary.hpp"

namespace orzo::grammar {

// The language a constraint describes (GrammarError when it cannot be compiled): the
// automaton alone, as a front end checks a request before anything starts.
Automaton compile_automaton(const OutputConstraint& constraint);

// Why the constraint cannot be compiled (GrammarError's message), or none: what a request is
// held to before it starts (protocol/generation_request.hpp). Verdicts on recent texts are
// remembered, so a schema sent with every request is compiled once. Safe from many threads.
std::optional<std::string> constraint_problem(const OutputConstraint& constraint);

using orzo::TokenMask;

class CompiledConstraint {
 public:
  CompiledConstraint(Automaton automaton, std::shared_ptr<const Vocabulary> vocab);

  int32_t start() const { return automaton_.start(); }
  // The tokens allowed in `state` (a state advance() returned). Safe from many threads.
  std::shared_ptr<const TokenMask> mask(int32_t state) const;
  bool has_mask(int32_t state) const;  // mask(state) is built already: a lookup
  // The state after `token`; Automaton::kDead for a token the mask did not allow. EOS keeps the
  // state (the output has ended).
  int32_t advance(int32_t state, int32_t token) const;
  bool is_eos(int32_t token) const;
  const Vocabulary& vocabulary() const { return *vocab_; }
  const Automaton& automaton() const { return automaton_; }
  // Masks built so far: what the constraint holds in memory.
  size_t masks() const;

 private:
  std::shared_ptr<TokenMask> build(int32_t state) const;

  Automaton automaton_;
  std::shared_ptr<const Vocabulary> vocab_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<int32_t, std::shared_ptr<const TokenMask>> masks_;
};

// Compiled constraints by their text, so that a schema many requests share is compiled once
// (least recently used evicted past `capacity`). One holding more than max_masks masks is
// compiled anew for the next request (its users keep it), which bounds the memory of a
// grammar whose configurations keep coming (pushdown.hpp). Safe from many threads.
class ConstraintCache {
 public:
  static constexpr size_t kMaxMasks = 4096;
  explicit ConstraintCache(std::shared_ptr<const Vocabulary> vocab, size_t capacity = 64, size_t max_masks = kMaxMasks)
      : vocab_(std::move(vocab)), capacity_(capacity), max_masks_(max_masks) {}
  // GrammarError when the constraint cannot be compiled.
  std::shared_ptr<const CompiledConstraint> get(const OutputConstraint& constraint);
  const std::shared_ptr<const Vocabulary>& vocabulary() const { return vocab_; }

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  size_t capacity_;
  size_t max_masks_;
  std::mutex mutex_;
  uint64_t clock_ = 0;
  struct Entry {
    std::shared_ptr<const CompiledConstraint> compiled;
    uint64_t used = 0;
  };
  std::unordered_map<std::string, Entry> entries_;
};

// A sequence's progress through its constraint: the state its output so far leaves.
class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(std::shared_ptr<const CompiledConstraint> compiled)
      : compiled_(std::move(compiled)), state_(compiled_->start()) {}
  std::shared_ptr<const TokenMask> mask() const { return compiled_->mask(state_); }
  bool mask_ready() const { return compiled_->has_mask(state_); }
  // False when the token breaks the constraint (it was not allowed).
  bool advance(int32_t token);

 private:
  std::shared_ptr<const CompiledConstraint> compiled_;
  int32_t state_;
};

}  // namespace orzo::grammar
