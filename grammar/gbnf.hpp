#pragma once
// GBNF, llama.cpp's grammar format: `name ::= alternatives` rules, the output being `root`.
// Elements: "literals" and [classes] (escapes \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH,
// ranges, ^), `.` (any character), rule names, ( groups ), and the postfixes * + ? {m}
// {m,} {m,n} {,n}; `#` comments; a rule ends at the end of its line, unless inside
// parentheses or after a `|`.
//
// Grammars are compiled to byte automata, so recursion (a rule reaching itself, as JSON's
// value does through objects and arrays) is unrolled kMaxRuleDepth deep: output nesting
// deeper than that is not generated. GrammarError names what is wrong and where.
#include <string>

#include "grammar/regex.hpp"

namespace orzo::grammar {

inline constexpr int kMaxRuleDepth = 5;

RegexPtr parse_gbnf(const std::string& grammar);

}  // namespace orzo::grammar
