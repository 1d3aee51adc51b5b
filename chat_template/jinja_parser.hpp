#pragma once
// Parses jinja2's grammar (operator precedence, filters, tests, statements) into the syntax tree.
// What it does not implement — tags such as call, raw, include or extends, unknown filters and
// tests, star-arguments — is refused here with a ChatTemplateError naming the construct and its
// line:col, so a template either renders as jinja2 would or fails before rendering anything.

#include <string_view>

#include "chat_template/jinja_ast.hpp"

namespace orzo::jinja {

// Nesting deeper than this (blocks or expression parentheses) is refused: the parser, the
// evaluator and the tree's destructor all recurse over it.
inline constexpr int kMaxSyntaxDepth = 64;

Body parse_template(std::string_view source);

}  // namespace orzo::jinja
