#pragma once
// Thompson's construction and the subset construction, shared by the two automata a
// constraint becomes: the byte DFA of a regular language (byte_dfa.hpp) and the rule DFAs of
// a pushdown automaton (pushdown.hpp). A reference to a rule (Regex::Kind::rule) is an edge of
// its own, a call, which the subset construction determinizes like a byte.
#include <array>
#include <cstdint>
#include <vector>

#include "grammar/regex.hpp"

namespace orzo::grammar {

struct NfaEdge {
  uint8_t lo, hi;
  int32_t to;
};
struct NfaCall {
  int32_t rule, to;
};
struct NfaState {
  std::vector<int32_t> eps;
  std::vector<NfaEdge> edges;
  std::vector<NfaCall> calls;
};

class Nfa {
 public:
  // GrammarError past max_states, counting `used` states of other automata of the same
  // constraint.
  explicit Nfa(size_t max_states, size_t used = 0) : max_states_(max_states), used_(used) {}
  int32_t add();
  // Appends the language of r after state `from`; returns the state where it ends.
  int32_t build(const Regex& r, int32_t from);
  // The set and every state its empty moves reach, sorted.
  void close(std::vector<int32_t>& set) const;

  std::vector<NfaState> states;

 private:
  void eps(int32_t from, int32_t to) { states[static_cast<size_t>(from)].eps.push_back(to); }
  size_t max_states_, used_;
  mutable std::vector<uint8_t> seen_;
};

// Bytes no edge of the automata tells apart share a class, so tables have a column per class.
struct ByteClasses {
  std::array<uint8_t, 256> of{};
  size_t count = 1;
  std::vector<uint8_t> representative;  // a byte of each class
  static ByteClasses of_edges(const std::vector<const Nfa*>& automata);
};

// The subset construction from `start`, before trimming. A state of the result is a set of
// NFA states; it accepts when the set holds `accept`.
struct Subsets {
  static constexpr int32_t kDead = -1;
  std::vector<int32_t> next;                  // states x classes: the state after a byte, or kDead
  std::vector<std::vector<NfaCall>> calls;    // per state: each rule called there and the state after it
  std::vector<uint8_t> accepting;
  size_t states() const { return accepting.size(); }
  // GrammarError past max_states, counting `used` states of other automata of the same
  // constraint, or once `work` (the NFA states visited, which the other automata add to as
  // well) passes max_work.
  static Subsets build(const Nfa& nfa, int32_t start, int32_t accept, const ByteClasses& classes, size_t max_states,
                       size_t used, size_t max_work, size_t& work);
};

// For each state of a table of byte edges (states x classes, kDead for none), the states
// whose edges lead to it.
std::vector<std::vector<int32_t>> predecessors(const std::vector<int32_t>& next, size_t classes);
// Whether a byte edge of state s leads to a flagged state.
bool edge_into(const std::vector<int32_t>& next, size_t classes, size_t s, const std::vector<uint8_t>& flag);

// Sets flag[s] wherever `holds(s)` until nothing changes (the least fixpoint of a rule whose
// premises are other states' flags: a state is live if an edge leads to a live one, say),
// re-asking only the states `depends` lists for a state just flagged.
template <class Holds>
void fixpoint(std::vector<uint8_t>& flag, const std::vector<std::vector<int32_t>>& depends, Holds holds) {
  std::vector<int32_t> work;
  for (size_t s = 0; s < flag.size(); ++s)
    if (flag[s] || holds(s)) flag[s] = 1, work.push_back(static_cast<int32_t>(s));
  while (!work.empty()) {
    const auto t = static_cast<size_t>(work.back());
    work.pop_back();
    for (int32_t s : depends[t])
      if (!flag[static_cast<size_t>(s)] && holds(static_cast<size_t>(s))) flag[static_cast<size_t>(s)] = 1, work.push_back(s);
  }
}

}  // namespace orzo::grammar
