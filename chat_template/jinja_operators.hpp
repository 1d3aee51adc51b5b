#pragma once
// Jinja's operators on values, with the Python semantics jinja2 delegates to: int/float
// promotion, floor division and modulo rounding toward negative infinity, sequence repetition
// and concatenation, and `in`. Python ints are unbounded; here they are 64-bit, and overflowing
// is an error rather than a wrapped result.

#include <string_view>

#include "chat_template/jinja_budget.hpp"
#include "chat_template/jinja_value.hpp"

namespace orzo::jinja {

// op: one of + - * / // % ** ~
Value binary_op(std::string_view op, const Value& a, const Value& b, Budget& budget);
Value negate(const Value& v, bool minus);  // unary - (minus) or +
bool contains(const Value& container, const Value& item);  // item in container

}  // namespace orzo::jinja
