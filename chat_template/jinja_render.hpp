#pragma once
// Runs a parsed template against a set of variables. Scoping follows jinja2: a for loop gives
// each iteration its own scope (so `set` inside a loop does not leak out, hence namespace()),
// if-blocks do not, and macros see their arguments plus the template's top-level names.

#include <string>
#include <utility>
#include <vector>

#include "chat_template/jinja_ast.hpp"
#include "chat_template/jinja_budget.hpp"

namespace orzo::jinja {

std::string render(const Body& body, const std::vector<std::pair<std::string, Value>>& variables, const RenderLimits& limits);

}  // namespace orzo::jinja
