#include "chat_template/jinja_operators.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "chat_template/chat_template_error.hpp"

namespace orzo::jinja {
namespace {

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
  throw ChatTemplateError("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() {
  throw ChatTemplateError("integer overflow: the interpreter's integers are 64-bit");
}

bool is_int_like(const Value& v) { return v.kind() == Kind::Int || v.kind() == Kind::Bool; }

int64_t int_op(char op, int64_t x, int64_t y) {
  int64_t r = 0;
  switch (op) {
    case '+':
      if (__builtin_add_overflow(x, y, &r)) overflow();
      return r;
    case '-':
      if (__builtin_sub_overflow(x, y, &r)) overflow();
      return r;
    case '*':
      if (__builtin_mul_overflow(x, y, &r)) overflow();
      return r;
    default: break;
  }
  if (y == 0) throw ChatTemplateError("integer division or modulo by zero");
  if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
  const int64_t q = x / y;
  const int64_t m = x % y;
  const bool adjust = m != 0 && ((m < 0) != (y < 0));
  return op == '/' ? (adjust ? q - 1 : q) : (adjust ? m + y : m);  // '/' stands for floor division here
}

double float_mod(double x, double y) {
  double m = std::fmod(x, y);
  if (m != 0.0) {
    if ((y < 0) != (m < 0)) m += y;
  } else {
    m = std::copysign(0.0, y);
  }
  return m;
}

double float_floordiv(double x, double y) {
  const double m = std::fmod(x, y);
  double div = (x - m) / y;
  if (m != 0.0 && ((y < 0) != (m < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, x / y);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if ((exp & 1) != 0 && __builtin_mul_overflow(result, base, &result)) overflow();
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return Value::integer(result);
}

Value repeat(const Value& seq, int64_t times, Budget& budget) {
  const size_t n = times > 0 ? static_cast<size_t>(times) : 0;
  if (seq.is_string()) {
    const size_t len = seq.str().size();
    if (n > 0 && len > 0) budget.string_of(len > budget.limits().max_string_bytes / n ? SIZE_MAX : len * n);
    std::string out;
    out.reserve(len * n);
    for (size_t i = 0; i < n; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  const size_t len = seq.items().size();
  if (n > 0 && len > 0) budget.list_of(len > budget.limits().max_list_items / n ? SIZE_MAX : len * n);
  std::vector<Value> out;
  out.reserve(len * n);
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.list_data().seq);
}

}  // namespace

Value binary_op(std::string_view op, const Value& a, const Value& b, Budget& budget) {
  if (op == "~") {
    std::string left = to_str(a);
    const std::string right = to_str(b);
    budget.string_of(left.size() + right.size());
    return Value::string(left + right);
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    const bool ints = is_int_like(a) && is_int_like(b);
    if (op == "/") {
      if (b.as_double() == 0.0) throw ChatTemplateError("division by zero");
      return Value::number(a.as_double() / b.as_double());
    }
    if (op == "**") {
      if (ints && b.as_int() >= 0) return int_pow(a.as_int(), b.as_int());
      const double x = a.as_double();
      const double y = b.as_double();
      if (x == 0.0 && y < 0) throw ChatTemplateError("0.0 cannot be raised to a negative power");
      if (x < 0 && std::floor(y) != y) throw ChatTemplateError("unsupported: a negative number raised to a fractional power is complex");
      return Value::number(std::pow(x, y));
    }
    const char c = op == "//" ? '/' : op[0];
    if (op != "+" && op != "-" && op != "*" && op != "//" && op != "%") unsupported_operands(op, a, b);
    if (ints) return Value::integer(int_op(c, a.as_int(), b.as_int()));
    const double x = a.as_double();
    const double y = b.as_double();
    switch (c) {
      case '+': return Value::number(x + y);
      case '-': return Value::number(x - y);
      case '*': return Value::number(x * y);
      default: break;
    }
    if (y == 0.0) throw ChatTemplateError("float division or modulo by zero");
    return Value::number(c == '/' ? float_floordiv(x, y) : float_mod(x, y));
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      budget.string_of(a.str().size() + b.str().size());
      return Value::string(a.str() + b.str());
    }
    if (a.is_indexable() && b.is_indexable() && a.is_tuple() == b.is_tuple()) {
      budget.list_of(a.items().size() + b.items().size());
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.list_data().seq);
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_indexable()) && is_int_like(b)) return repeat(a, b.as_int(), budget);
    if ((b.is_string() || b.is_indexable()) && is_int_like(a)) return repeat(b, a.as_int(), budget);
  }
  if (op == "%" && a.is_string()) throw ChatTemplateError("unsupported: printf-style string formatting with '%'");
  unsupported_operands(op, a, b);
}

Value negate(const Value& v, bool minus) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind() == Kind::Float) return Value::number(minus ? -v.as_double() : v.as_double());
  if (is_int_like(v)) {
    if (!minus) return Value::integer(v.as_int());
    if (v.as_int() == std::numeric_limits<int64_t>::min()) overflow();
    return Value::integer(-v.as_int());
  }
  throw ChatTemplateError(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined: return false;
    case Kind::String:
      if (!item.is_string()) throw ChatTemplateError("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      if (!container.list_data().error.empty()) throw ChatTemplateError(container.list_data().error);
      for (const Value& v : container.items()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::Dict:
      if (item.is_list() && !item.is_tuple()) throw ChatTemplateError("unhashable type: '" + type_name(item) + "'");
      if (item.is_dict()) throw ChatTemplateError("unhashable type: 'dict'");
      return item.is_string() && container.dict_data().find(item.str()) != nullptr;
    default: break;
  }
  throw ChatTemplateError("argument of type '" + type_name(container) + "' is not iterable");
}

}  // namespace orzo::jinja
