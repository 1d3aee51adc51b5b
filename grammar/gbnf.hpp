#pragma once
// GBNF, llama.cpp's grammar format: `name ::= alternatives` rules, the output being `root`.
// Elements: "literals" and [classes] (escapes \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH,
// ranges, ^), `.` (any character), rule names, ( groups ), and the postfixes * + ? {m}
// {m,} {m,n} {,n}; `#` comments; a rule ends at the end of its line, unless inside
// parentheses or after a `|`.
//
// Rules may reach themselves (JSON's value through objects and arrays), except on the left:
// a grammar with recursion becomes a pushdown automaton (pushdown.hpp), one without a byte
// DFA. GrammarError names what is wrong and where.
#include <string>

#include "grammar/grammar.hpp"

namespace orzo::grammar {

// Rule 0 is `root`.
Grammar parse_gbnf(const std::string& grammar);

}  // namespace orzo::grammar
