#include "grammar/byte_dfa.hpp"

#include "grammar/grammar_error.hpp"
#include "grammar/nfa.hpp"

#include <string>

namespace orzo::grammar {

ByteDfa ByteDfa::compile(const RegexPtr& regex) {
  Nfa nfa(kMaxNfaStates);
  const int32_t start = nfa.add();
  const int32_t accept = nfa.build(*regex, start);
  const ByteClasses classes = ByteClasses::of_edges({&nfa});
  ByteDfa dfa;
  dfa.byte_class_.assign(classes.of.begin(), classes.of.end());
  dfa.classes_ = classes.count;
  size_t work = 0;
  const Subsets subsets = Subsets::build(nfa, start, accept, classes, kMaxDfaStates, 0, kMaxWork, work);
  for (const auto& calls : subsets.calls)
    if (!calls.empty()) throw GrammarError("a rule reference outside a grammar: inline it or compile the grammar");
  const std::vector<int32_t>& next = subsets.next;
  const std::vector<uint8_t>& accepting = subsets.accepting;

  // Trim: keep the states from which acceptance can be reached, renumbered in order.
  const size_t n = subsets.states();
  std::vector<uint8_t> live(accepting);
  fixpoint(live, predecessors(next, dfa.classes_), [&](size_t d) { return edge_into(next, dfa.classes_, d, live); });
  if (!live[0]) throw GrammarError("the constraint matches nothing: no output could satisfy it");
  std::vector<int32_t> renumber(n, kDead);
  int32_t kept = 0;
  for (size_t d = 0; d < n; ++d)
    if (live[d]) renumber[d] = kept++;
  dfa.next_.assign(static_cast<size_t>(kept) * dfa.classes_, kDead);
  dfa.accepting_.assign(static_cast<size_t>(kept), 0);
  dfa.continues_.assign(static_cast<size_t>(kept), 0);
  for (size_t d = 0; d < n; ++d) {
    if (!live[d]) continue;
    const auto r = static_cast<size_t>(renumber[d]);
    dfa.accepting_[r] = accepting[d];
    for (size_t c = 0; c < dfa.classes_; ++c) {
      const int32_t t = next[d * dfa.classes_ + c];
      const int32_t to = t == kDead ? kDead : renumber[static_cast<size_t>(t)];
      dfa.next_[r * dfa.classes_ + c] = to;
      if (to != kDead) dfa.continues_[r] = 1;
    }
  }
  return dfa;
}

}  // namespace orzo::grammar
