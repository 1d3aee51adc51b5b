#pragma once
// A context-free grammar: rules whose bodies are regular trees (regex.hpp) naming rules
// (Regex::Kind::rule), rule 0 the whole output. GBNF grammars, JSON schemas with $refs and
// values of any shape are grammars; those whose rules never reach themselves are regular
// languages, and inlining makes them one tree for a byte DFA.
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/regex.hpp"

namespace orzo::grammar {

struct Grammar {
  std::vector<std::string> names;  // for messages
  std::vector<RegexPtr> bodies;    // null until defined

  // A new rule, its body defined later, so that it may name itself.
  int32_t add(std::string name);
  void define(int32_t rule, RegexPtr body) { bodies[static_cast<size_t>(rule)] = std::move(body); }
  int32_t find(const std::string& name) const;  // -1 when there is none

  // Rule 0 with every rule that does not reach itself inlined where it is named, and the
  // rules that do (renumbered) beside it; rules rule 0 never reaches are gone. GrammarError
  // for a rule named but never defined.
  Grammar inlined() const;
  // One rule naming no rule: a regular language (after inlined()).
  bool regular() const;
};

// The grammar whose rule 0 is what build(grammar) returns, the rules it adds beside it.
template <class Build>
Grammar rooted(Build build) {
  Grammar grammar;
  const int32_t root = grammar.add("root");
  grammar.define(root, build(grammar));
  return grammar;
}

// The grammar of one regular tree.
inline Grammar regular_grammar(RegexPtr tree) {
  return rooted([&](Grammar&) { return tree; });
}

}  // namespace orzo::grammar
