#pragma once
// Regular languages over Unicode text, as trees: what every constraint (a regular
// expression, a JSON schema, a choice list, a grammar) is compiled to before it becomes an
// automaton (automaton.hpp); the rules of a grammar (grammar.hpp) are such trees naming each
// other. Nodes are immutable and may be shared.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/char_set.hpp"

namespace orzo::grammar {

struct Regex;
using RegexPtr = std::shared_ptr<const Regex>;

struct Regex {
  enum class Kind {
    chars,   // one code point of `chars`
    concat,  // the parts in order (none: the empty string)
    alt,     // any one part (none: nothing at all)
    repeat,  // parts[0], min..max times (max < 0: unbounded)
    // parts[0], one or more times with parts[1] between (zero times too when min == 0): one
    // copy of each in the automaton, where `x (sep x)*` would make two and so twice the states.
    separated,
    // Rule `min` of the grammar this tree belongs to (grammar.hpp): where a language stops
    // being regular, since a rule may reach itself.
    rule,
  };
  Kind kind = Kind::concat;
  CharSet chars;
  std::vector<RegexPtr> parts;
  int32_t min = 0;
  int32_t max = -1;
};

RegexPtr empty_string();
RegexPtr nothing();
RegexPtr chars(CharSet set);
RegexPtr literal(const std::string& utf8);  // these exact characters (valid UTF-8)
RegexPtr concat(std::vector<RegexPtr> parts);
RegexPtr alt(std::vector<RegexPtr> parts);
RegexPtr repeat(RegexPtr part, int32_t min, int32_t max);
inline RegexPtr optional(RegexPtr part) { return repeat(std::move(part), 0, 1); }
inline RegexPtr star(RegexPtr part) { return repeat(std::move(part), 0, -1); }
// item (separator item)*, or also nothing when !at_least_one.
RegexPtr separated(RegexPtr item, RegexPtr separator, bool at_least_one);
RegexPtr rule(int32_t index);

// The code points of a UTF-8 string (GrammarError on invalid UTF-8).
std::vector<uint32_t> code_points(const std::string& utf8);
// The code point starting at utf8[at], `at` moved past it (GrammarError on invalid UTF-8).
uint32_t next_code_point(const std::string& utf8, size_t& at);

}  // namespace orzo::grammar
