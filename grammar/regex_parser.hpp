#pragma once
// Regular expressions as Python's `re` and JavaScript write them, matched against the whole
// output (re.fullmatch): literals and escapes (\d \w \s and their negations, \t \n \r \f \v,
// \xHH, \uHHHH, \UHHHHHHHH, escaped punctuation), `.` (any character but a newline),
// classes [...] with ranges and ^, groups (...), (?:...), (?P<name>...), (?<name>...),
// alternation, and the quantifiers * + ? {n} {n,} {n,m} {,m} (lazy forms too: the same
// language). A leading ^ and a trailing $ are accepted and change nothing. \d \w \s mean
// their ASCII members, and \D \W \S the rest of ASCII: subsets of what Python matches, so
// whatever is generated, Python's re.fullmatch accepts. Backreferences, lookaround, other
// anchors, flags and conditionals cannot be expressed as a byte automaton: GrammarError,
// naming them and where they are.
#include <string>

#include "grammar/regex.hpp"

namespace orzo::grammar {

// `max_repeat` bounds {n,m} counts (a pattern asking more is GrammarError).
RegexPtr parse_regex(const std::string& pattern, int32_t max_repeat = 1000);

}  // namespace orzo::grammar
