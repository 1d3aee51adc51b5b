#include "chat_template/jinja_builtins.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>

#include "chat_template/chat_template_error.hpp"
#include "chat_template/jinja_operators.hpp"
#include "chat_template/py_string.hpp"

namespace orzo::jinja {
namespace {

// Binds positional and keyword arguments to named parameters, as Python does.
class Params {
 public:
  Params(const std::string& fn, Args& args, std::initializer_list<const char*> names)
      : fn_(fn), names_(names.begin(), names.end()), slots_(names.size()) {
    if (args.positional.size() > names_.size()) {
      throw ChatTemplateError(fn + "() takes at most " + std::to_string(names_.size()) + " argument(s), " +
                              std::to_string(args.positional.size()) + " given");
    }
    for (size_t i = 0; i < args.positional.size(); ++i) slots_[i] = args.positional[i];
    for (auto& [name, value] : args.keyword) {
      const auto it = std::find(names_.begin(), names_.end(), name);
      if (it == names_.end()) throw ChatTemplateError(fn + "() got an unexpected keyword argument '" + name + "'");
      auto& slot = slots_[static_cast<size_t>(it - names_.begin())];
      if (slot) throw ChatTemplateError(fn + "() got multiple values for argument '" + name + "'");
      slot = value;
    }
  }

  bool has(size_t i) const { return slots_[i].has_value(); }
  const Value& get(size_t i) const {
    if (!slots_[i]) throw ChatTemplateError(fn_ + "() missing required argument '" + names_[i] + "'");
    return *slots_[i];
  }
  Value get_or(size_t i, Value fallback) const { return slots_[i] ? *slots_[i] : std::move(fallback); }
  std::string string(size_t i) const {
    const Value& v = get(i);
    if (!v.is_string()) throw ChatTemplateError(fn_ + "(): argument '" + names_[i] + "' must be str, not " + type_name(v));
    return v.str();
  }
  // A str argument that may be missing or None.
  std::optional<std::string> optional_string(size_t i) const {
    if (!slots_[i] || slots_[i]->is_none()) return std::nullopt;
    return string(i);
  }
  int64_t integer(size_t i, int64_t fallback) const {
    if (!slots_[i] || slots_[i]->is_none()) return fallback;
    if (slots_[i]->kind() != Kind::Int && slots_[i]->kind() != Kind::Bool) {
      throw ChatTemplateError(fn_ + "(): argument '" + names_[i] + "' must be an integer, not " + type_name(*slots_[i]));
    }
    return slots_[i]->as_int();
  }

 private:
  std::string fn_;
  std::vector<std::string> names_;
  std::vector<std::optional<Value>> slots_;
};

Value str_value(std::string s, Budget& budget) {
  budget.string_of(s.size());
  return Value::string(std::move(s));
}

Value list_value(std::vector<Value> items, Budget& budget, Sequence seq = Sequence::List) {
  budget.list_of(items.size());
  return Value::list(std::move(items), seq);
}

Value string_list(const std::vector<std::string>& parts, Budget& budget) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const std::string& p : parts) items.push_back(Value::string(p));
  return list_value(std::move(items), budget);
}

std::vector<Value> chars_of(const std::string& s) {
  std::vector<Value> out;
  for (const char32_t c : py::decode_utf8(s)) {
    std::string one;
    py::append_utf8(one, c);
    out.push_back(Value::string(std::move(one)));
  }
  return out;
}

// Case mapping of non-ASCII text needs Unicode tables this interpreter does not carry.
std::string ascii_case(const std::string& s, const char* what, int (*map)(int)) {
  std::string out = s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) >= 0x80) throw ChatTemplateError(std::string("unsupported: ") + what + " of non-ASCII text");
    c = static_cast<char>(map(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_case(s, "capitalize()", [](int c) { return std::tolower(c); });
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string title(const std::string& s) {
  std::string out = ascii_case(s, "title()", [](int c) { return c; });
  bool prev_cased = false;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    c = static_cast<char>(alpha && !prev_cased ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    prev_cased = alpha;
  }
  return out;
}

std::string upper(const std::string& s) { return ascii_case(s, "upper()", [](int c) { return std::toupper(c); }); }
std::string lower(const std::string& s) { return ascii_case(s, "lower()", [](int c) { return std::tolower(c); }); }

bool has_prefix_arg(const std::string& fn, const std::string& s, const Value& arg, bool suffix) {
  const auto one = [&](const Value& v) {
    if (!v.is_string()) throw ChatTemplateError(fn + "() argument must be str or a tuple of str, not " + type_name(v));
    const std::string& p = v.str();
    if (p.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - p.size(), p.size(), p) == 0 : s.compare(0, p.size(), p) == 0;
  };
  if (arg.is_tuple()) {
    return std::any_of(arg.items().begin(), arg.items().end(), one);
  }
  return one(arg);
}

int64_t code_point_index(const std::string& s, size_t byte_offset) {
  return static_cast<int64_t>(py::count_code_points(std::string_view(s).substr(0, byte_offset)));
}

// The budget of py::replace's result, charged before it is built: a short input can ask for a
// result far over the string limit.
void charge_replace(Budget& b, const std::string& s, const std::string& from, const std::string& to) {
  const size_t hits = from.empty() ? py::count_code_points(s) + 1 : s.size() / from.size();
  b.string_of(s.size() + (to.size() > 0 && hits > 0 && to.size() > SIZE_MAX / 2 / hits ? SIZE_MAX / 2 : to.size() * hits));
}

// A str method called on `s`; `fn` is its name for errors, such as "str.split".
using StrMethodFn = Value (*)(const std::string& s, const std::string& fn, Args& args, Budget& b);

// The str methods that come in pairs or families (startswith and endswith, strip and its
// one-sided forms, ...), told apart by their flags.
Value str_has_affix(const std::string& s, const std::string& fn, Args& args, bool suffix) {
  Params p(fn, args, {"prefix"});
  return Value::boolean(has_prefix_arg(fn, s, p.get(0), suffix));
}

Value str_remove_affix(const std::string& s, const std::string& fn, Args& args, Budget& b, bool suffix) {
  Params p(fn, args, {"affix"});
  const Value affix = Value::string(p.string(0));
  if (!has_prefix_arg(fn, s, affix, suffix)) return Value::string(s);
  const size_t n = affix.str().size();
  return str_value(suffix ? s.substr(0, s.size() - n) : s.substr(n), b);
}

Value str_split(const std::string& s, const std::string& fn, Args& args, Budget& b, bool right) {
  Params p(fn, args, {"sep", "maxsplit"});
  const auto sep = p.optional_string(0);
  const int64_t maxsplit = p.integer(1, -1);
  return string_list(right ? py::rsplit(s, sep, maxsplit) : py::split(s, sep, maxsplit), b);
}

Value str_strip(const std::string& s, const std::string& fn, Args& args, Budget& b, bool left, bool right) {
  Params p(fn, args, {"chars"});
  return str_value(py::strip(s, p.optional_string(0), left, right), b);
}

// upper, lower, capitalize and title: no arguments, checked before the string is mapped.
Value str_mapped(const std::string& s, const std::string& fn, Args& args, Budget& b, std::string (*map)(const std::string&)) {
  Params p(fn, args, {});
  return str_value(map(s), b);
}

// find, rfind, index and rindex: the index in code points; index and rindex throw where the
// find forms return -1.
Value str_find(const std::string& s, const std::string& fn, Args& args, bool from_right, bool must_find) {
  Params p(fn, args, {"sub"});
  const std::string sub = p.string(0);
  const size_t pos = from_right ? s.rfind(sub) : s.find(sub);
  if (pos == std::string::npos) {
    if (must_find) throw ChatTemplateError(fn + "(): substring not found");
    return Value::integer(-1);
  }
  return Value::integer(code_point_index(s, pos));
}

// Python str methods a template may call.
const std::map<std::string, StrMethodFn, std::less<>>& string_methods() {
  static const std::map<std::string, StrMethodFn, std::less<>> table = {
      {"capitalize", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_mapped(s, fn, args, b, capitalize); }},
      {"count", [](const std::string& s, const std::string& fn, Args& args, Budget&) {
         Params p(fn, args, {"sub"});
         const std::string sub = p.string(0);
         if (sub.empty()) return Value::integer(static_cast<int64_t>(py::count_code_points(s)) + 1);
         int64_t n = 0;
         for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
         return Value::integer(n);
       }},
      {"endswith", [](const std::string& s, const std::string& fn, Args& args, Budget&) { return str_has_affix(s, fn, args, true); }},
      {"find", [](const std::string& s, const std::string& fn, Args& args, Budget&) { return str_find(s, fn, args, false, false); }},
      {"index", [](const std::string& s, const std::string& fn, Args& args, Budget&) { return str_find(s, fn, args, false, true); }},
      {"isspace", [](const std::string& s, const std::string& fn, Args& args, Budget&) {
         Params p(fn, args, {});
         const std::u32string cps = py::decode_utf8(s);
         return Value::boolean(!cps.empty() && std::all_of(cps.begin(), cps.end(), py::is_space));
       }},
      {"join", [](const std::string& s, const std::string& fn, Args& args, Budget& b) {
         Params p(fn, args, {"iterable"});
         std::string out;
         bool first = true;
         for (const Value& v : iterate(p.get(0))) {
           if (!v.is_string()) throw ChatTemplateError(fn + "(): sequence item must be str, not " + type_name(v));
           if (!first) out += s;
           first = false;
           b.append_of(out.size() + v.str().size(), v.str().size());
           out += v.str();
         }
         return str_value(std::move(out), b);
       }},
      {"lower", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_mapped(s, fn, args, b, lower); }},
      {"lstrip", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_strip(s, fn, args, b, true, false); }},
      {"removeprefix", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_remove_affix(s, fn, args, b, false); }},
      {"removesuffix", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_remove_affix(s, fn, args, b, true); }},
      {"replace", [](const std::string& s, const std::string& fn, Args& args, Budget& b) {
         Params p(fn, args, {"old", "new", "count"});
         const std::string from = p.string(0);
         const std::string to = p.string(1);
         const int64_t count = p.integer(2, -1);
         charge_replace(b, s, from, to);
         return str_value(py::replace(s, from, to, count), b);
       }},
      {"rfind", [](const std::string& s, const std::string& fn, Args& args, Budget&) { return str_find(s, fn, args, true, false); }},
      {"rindex", [](const std::string& s, const std::string& fn, Args& args, Budget&) { return str_find(s, fn, args, true, true); }},
      {"rsplit", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_split(s, fn, args, b, true); }},
      {"rstrip", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_strip(s, fn, args, b, false, true); }},
      {"split", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_split(s, fn, args, b, false); }},
      {"startswith", [](const std::string& s, const std::string& fn, Args& args, Budget&) { return str_has_affix(s, fn, args, false); }},
      {"strip", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_strip(s, fn, args, b, true, true); }},
      {"title", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_mapped(s, fn, args, b, title); }},
      {"upper", [](const std::string& s, const std::string& fn, Args& args, Budget& b) { return str_mapped(s, fn, args, b, upper); }},
  };
  return table;
}

// `self.name` on a string: the method bound to its string. Names of real str methods that are
// not implemented are refused by name so that a template using them fails instead of printing
// an undefined.
Value string_method(const Value& self, const std::string& name, Budget& budget) {
  const auto it = string_methods().find(name);
  if (it != string_methods().end()) {
    const std::string fn = "str." + name;
    return Value::function(fn, [s = self.str(), fn, body = it->second, &budget](Args& args) -> Value { return body(s, fn, args, budget); });
  }
  static const char* const kOtherStrMethods[] = {
      "casefold", "center", "encode", "expandtabs", "format", "format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
      "isidentifier", "islower", "isnumeric", "isprintable", "istitle", "isupper", "ljust", "maketrans", "partition", "rjust",
      "rpartition", "splitlines", "swapcase", "translate", "zfill"};
  for (const char* other : kOtherStrMethods) {
    if (name == other) throw ChatTemplateError("unsupported string method '" + name + "'");
  }
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

std::optional<Value> dict_method(const Value& self, const std::string& name, Budget& budget) {
  const auto method = [&](auto body) {
    return Value::function("dict." + name, [self, name, body, &budget](Args& args) -> Value { return body(self, "dict." + name, args, budget); });
  };
  if (name == "items" || name == "keys" || name == "values") {
    return method([name](const Value& d, const std::string& f, Args& args, Budget& b) {
      Params p(f, args, {});
      std::vector<Value> out;
      for (const auto& [key, value] : d.dict_data().entries) {
        if (name == "items") {
          out.push_back(Value::list({Value::string(key), value}, Sequence::Tuple));
        } else {
          out.push_back(name == "keys" ? Value::string(key) : value);
        }
      }
      const Sequence view = name == "items" ? Sequence::DictItems : (name == "keys" ? Sequence::DictKeys : Sequence::DictValues);
      return list_value(std::move(out), b, view);
    });
  }
  if (name == "get") {
    return method([](const Value& d, const std::string& f, Args& args, Budget&) {
      Params p(f, args, {"key", "default"});
      const Value& key = p.get(0);
      const Value* found = key.is_string() ? d.dict_data().find(key.str()) : nullptr;
      return found != nullptr ? *found : p.get_or(1, Value::none());
    });
  }
  if (name == "copy") {
    return method([](const Value& d, const std::string& f, Args& args, Budget&) {
      Params p(f, args, {});
      return d;
    });
  }
  if (name == "clear" || name == "fromkeys" || name == "pop" || name == "popitem" || name == "setdefault" || name == "update") {
    throw ChatTemplateError("unsupported: dict." + name + "() (the sandbox does not let templates modify a dict)");
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name, Budget& budget) {
  const auto method = [&](auto body) {
    return Value::function("list." + name, [self, name, body, &budget](Args& args) -> Value { return body(self, "list." + name, args, budget); });
  };
  if (name == "index" || name == "count") {
    const bool count = name == "count";
    return method([count](const Value& l, const std::string& f, Args& args, Budget&) {
      Params p(f, args, {"value"});
      int64_t n = 0;
      for (size_t i = 0; i < l.items().size(); ++i) {
        if (!equals(l.items()[i], p.get(0))) continue;
        if (!count) return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (!count) throw ChatTemplateError(f + "(x): x not in list");
      return Value::integer(n);
    });
  }
  if (name == "copy" && !self.is_tuple()) {
    return method([](const Value& l, const std::string& f, Args& args, Budget&) {
      Params p(f, args, {});
      return l;
    });
  }
  if (self.is_tuple()) return std::nullopt;
  if (name == "append" || name == "clear" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
      name == "reverse" || name == "sort") {
    throw ChatTemplateError("unsupported: list." + name + "() (the sandbox does not let templates modify a list)");
  }
  return std::nullopt;
}

// jinja2's attribute getter for map/selectattr/join: "a.b.0" looks up items, then attributes.
Value lookup_path(const Value& item, const std::string& path, Budget& budget) {
  Value v = item;
  for (const std::string& part : py::split(path, std::string("."), -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, digits && part.size() < 18 ? Value::integer(std::stoll(part)) : Value::string(part), budget);
  }
  return v;
}

int64_t sequence_length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: return static_cast<int64_t>(py::count_code_points(v.str()));
    case Kind::List:
      if (v.list_data().seq == Sequence::Generator) break;
      return static_cast<int64_t>(v.items().size());
    case Kind::Dict: return static_cast<int64_t>(v.dict_data().entries.size());
    default: break;
  }
  throw ChatTemplateError("object of type '" + type_name(v) + "' has no len()");
}

std::optional<double> parse_py_float(std::string text) {
  text = py::strip(text, std::nullopt, true, true);
  std::string cleaned;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_' && i > 0 && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '+' && c != '-') return std::nullopt;
    if (c == 'x' || c == 'X' || c == 'p' || c == 'P') return std::nullopt;  // strtod reads hex floats, Python does not
    cleaned.push_back(c);
  }
  if (cleaned.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(cleaned.c_str(), &end);
  if (end != cleaned.c_str() + cleaned.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> parse_py_int(const std::string& raw) {
  const std::string text = py::strip(raw, std::nullopt, true, true);
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  if (i == text.size()) return std::nullopt;
  int64_t value = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_' && i + 1 < text.size() && i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1]))) continue;
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, c - '0', &value)) {
      throw ChatTemplateError("int filter: integer overflow: the interpreter's integers are 64-bit");
    }
  }
  return negative ? -value : value;
}

int64_t float_to_int(double d) {
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) throw ChatTemplateError("int filter: cannot convert " + py::float_repr(d) + " to a 64-bit integer");
  return static_cast<int64_t>(d);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

Value filter_tojson(const Value& in, Args& args, Budget& b) {
  Params p("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = truthy(p.get_or(0, Value::boolean(false)));
  const Value indent = p.get_or(1, Value::none());
  if (indent.is_string()) {
    o.indent = indent.str();
  } else if (indent.kind() == Kind::Int) {
    o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent.as_int(), 0, 256)), ' ');
  } else if (!indent.is_none()) {
    throw ChatTemplateError("tojson(): indent must be None, an int or a str, not " + type_name(indent));
  }
  if (o.indent) o.item_separator = ",";
  const Value separators = p.get_or(2, Value::none());
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.items().size() != 2 || !separators.items()[0].is_string() || !separators.items()[1].is_string()) {
      throw ChatTemplateError("tojson(): separators must be a pair of strings");
    }
    o.item_separator = separators.items()[0].str();
    o.key_separator = separators.items()[1].str();
  }
  o.sort_keys = truthy(p.get_or(3, Value::boolean(false)));
  return str_value(to_json(in, o), b);
}

std::vector<Value> select_items(const std::string& fn, const Value& in, Args& args, bool by_attribute, bool keep, Budget& b) {
  if (by_attribute && args.positional.empty()) throw ChatTemplateError(fn + "() missing the attribute argument");
  const std::string attribute = by_attribute ? to_str(args.positional[0]) : "";
  const size_t test_at = by_attribute ? 1 : 0;
  std::optional<std::string> test;
  if (args.positional.size() > test_at) {
    if (!args.positional[test_at].is_string()) throw ChatTemplateError(fn + "(): the test name must be a string");
    test = args.positional[test_at].str();
    if (!has_test(*test)) throw ChatTemplateError(fn + "(): unsupported test '" + *test + "'");
  }
  Args test_args;
  for (size_t i = test_at + 1; i < args.positional.size(); ++i) test_args.positional.push_back(args.positional[i]);
  test_args.keyword = args.keyword;
  std::vector<Value> out;
  for (const Value& item : iterate(in)) {
    const Value subject = by_attribute ? lookup_path(item, attribute, b) : item;
    Args call_args = test_args;
    const bool pass = test ? apply_test(*test, subject, call_args) : truthy(subject);
    if (pass == keep) out.push_back(item);
  }
  return out;
}

using FilterFn = Value (*)(const Value&, Args&, Budget&);

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs", [](const Value& in, Args& args, Budget&) {
         Params p("abs", args, {});
         if (in.kind() == Kind::Float) return Value::number(std::fabs(in.as_double()));
         if (!in.is_number()) throw ChatTemplateError("bad operand type for abs(): '" + type_name(in) + "'");
         return negate(in, in.as_int() < 0);
       }},
      {"capitalize", [](const Value& in, Args& args, Budget& b) {
         Params p("capitalize", args, {});
         return str_value(capitalize(to_str(in)), b);
       }},
      {"count", [](const Value& in, Args& args, Budget&) {
         Params p("count", args, {});
         return Value::integer(sequence_length(in));
       }},
      {"default", [](const Value& in, Args& args, Budget&) {
         Params p("default", args, {"default_value", "boolean"});
         const bool use_default = truthy(p.get_or(1, Value::boolean(false))) ? !truthy(in) : in.is_undefined();
         return use_default ? p.get_or(0, Value::string("")) : in;
       }},
      {"escape", [](const Value& in, Args& args, Budget& b) {
         Params p("escape", args, {});
         return str_value(html_escape(to_str(in)), b);
       }},
      {"first", [](const Value& in, Args& args, Budget&) {
         Params p("first", args, {});
         std::vector<Value> all = iterate(in);
         return all.empty() ? Value::undefined("first(): empty sequence") : all.front();
       }},
      {"float", [](const Value& in, Args& args, Budget&) {
         Params p("float", args, {"default"});
         if (in.is_undefined()) fail_undefined(in);
         if (in.is_number()) return Value::number(in.as_double());
         if (in.is_string()) {
           if (const auto d = parse_py_float(in.str())) return Value::number(*d);
         }
         return p.get_or(0, Value::number(0.0));
       }},
      {"int", [](const Value& in, Args& args, Budget&) {
         Params p("int", args, {"default", "base"});
         if (p.integer(1, 10) != 10) throw ChatTemplateError("unsupported: int filter with a base other than 10");
         if (in.is_undefined()) fail_undefined(in);
         if (in.kind() == Kind::Float) return Value::integer(float_to_int(in.as_double()));
         if (in.is_number()) return Value::integer(in.as_int());
         if (in.is_string()) {
           if (const auto i = parse_py_int(in.str())) return Value::integer(*i);
           if (const auto d = parse_py_float(in.str())) return Value::integer(float_to_int(*d));
         }
         return p.get_or(0, Value::integer(0));
       }},
      {"items", [](const Value& in, Args& args, Budget& b) {
         Params p("items", args, {});
         if (in.is_undefined()) return list_value({}, b, Sequence::Generator);
         if (!in.is_dict()) throw ChatTemplateError("items filter: can only be applied to a mapping, not " + type_name(in));
         std::vector<Value> out;
         for (const auto& [key, value] : in.dict_data().entries) out.push_back(Value::list({Value::string(key), value}, Sequence::Tuple));
         return list_value(std::move(out), b, Sequence::Generator);
       }},
      {"join", [](const Value& in, Args& args, Budget& b) {
         Params p("join", args, {"d", "attribute"});
         const std::string sep = to_str(p.get_or(0, Value::string("")));
         const std::optional<std::string> attribute = p.has(1) && !p.get(1).is_none() ? std::optional(to_str(p.get(1))) : std::nullopt;
         std::string out;
         bool first = true;
         for (const Value& item : iterate(in)) {
           if (!first) out += sep;
           first = false;
           const std::string piece = to_str(attribute ? lookup_path(item, *attribute, b) : item);
           b.append_of(out.size() + piece.size(), piece.size());
           out += piece;
         }
         return str_value(std::move(out), b);
       }},
      {"last", [](const Value& in, Args& args, Budget&) {
         Params p("last", args, {});
         if (in.is_list() && in.list_data().seq == Sequence::Generator) throw ChatTemplateError("last(): 'generator' object is not reversible");
         std::vector<Value> all = iterate(in);
         return all.empty() ? Value::undefined("last(): empty sequence") : all.back();
       }},
      {"length", [](const Value& in, Args& args, Budget&) {
         Params p("length", args, {});
         return Value::integer(sequence_length(in));
       }},
      {"list", [](const Value& in, Args& args, Budget& b) {
         Params p("list", args, {});
         return list_value(iterate(in), b);
       }},
      {"lower", [](const Value& in, Args& args, Budget& b) {
         Params p("lower", args, {});
         return str_value(lower(to_str(in)), b);
       }},
      {"map", [](const Value& in, Args& args, Budget& b) {
         std::vector<Value> out;
         const auto attribute = std::find_if(args.keyword.begin(), args.keyword.end(), [](const auto& kw) { return kw.first == "attribute"; });
         if (attribute != args.keyword.end()) {
           Value fallback;
           for (const auto& [name, value] : args.keyword) {
             if (name == "default") {
               fallback = value;
             } else if (name != "attribute") {
               throw ChatTemplateError("map() got an unexpected keyword argument '" + name + "'");
             }
           }
           if (!args.positional.empty()) throw ChatTemplateError("map(): positional arguments with attribute=");
           const std::string path = to_str(attribute->second);
           for (const Value& item : iterate(in)) {
             Value v = lookup_path(item, path, b);
             out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
           }
         } else {
           if (args.positional.empty() || !args.positional[0].is_string()) throw ChatTemplateError("map(): expected a filter name or attribute=");
           const std::string filter = args.positional[0].str();
           if (!has_filter(filter)) throw ChatTemplateError("map(): unsupported filter '" + filter + "'");
           for (const Value& item : iterate(in)) {
             Args call;
             call.positional.assign(args.positional.begin() + 1, args.positional.end());
             call.keyword = args.keyword;
             out.push_back(apply_filter(filter, item, call, b));
           }
         }
         return list_value(std::move(out), b, Sequence::Generator);
       }},
      {"reject", [](const Value& in, Args& args, Budget& b) { return list_value(select_items("reject", in, args, false, false, b), b, Sequence::Generator); }},
      {"rejectattr", [](const Value& in, Args& args, Budget& b) { return list_value(select_items("rejectattr", in, args, true, false, b), b, Sequence::Generator); }},
      {"replace", [](const Value& in, Args& args, Budget& b) {
         Params p("replace", args, {"old", "new", "count"});
         const std::string s = to_str(in);
         const std::string from = to_str(p.get(0));
         const std::string to = to_str(p.get(1));
         charge_replace(b, s, from, to);
         return str_value(py::replace(s, from, to, p.integer(2, -1)), b);
       }},
      {"reverse", [](const Value& in, Args& args, Budget& b) {
         Params p("reverse", args, {});
         if (in.is_string()) {
           std::u32string cps = py::decode_utf8(in.str());
           std::reverse(cps.begin(), cps.end());
           return str_value(py::encode_utf8(cps), b);
         }
         if (!in.is_list() && !in.is_dict() && !in.is_undefined()) throw ChatTemplateError("reverse filter: argument is not reversible: " + type_name(in));
         std::vector<Value> items = iterate(in);
         std::reverse(items.begin(), items.end());
         // reversed() gives an iterator; only a generator, which reversed() refuses, becomes a list.
         const bool generator = in.is_list() && in.list_data().seq == Sequence::Generator;
         return list_value(std::move(items), b, generator ? Sequence::List : Sequence::Generator);
       }},
      {"safe", [](const Value& in, Args& args, Budget& b) {
         Params p("safe", args, {});
         return str_value(to_str(in), b);
       }},
      {"select", [](const Value& in, Args& args, Budget& b) { return list_value(select_items("select", in, args, false, true, b), b, Sequence::Generator); }},
      {"selectattr", [](const Value& in, Args& args, Budget& b) { return list_value(select_items("selectattr", in, args, true, true, b), b, Sequence::Generator); }},
      {"string", [](const Value& in, Args& args, Budget& b) {
         Params p("string", args, {});
         return str_value(to_str(in), b);
       }},
      {"tojson", filter_tojson},
      {"trim", [](const Value& in, Args& args, Budget& b) {
         Params p("trim", args, {"chars"});
         return str_value(py::strip(to_str(in), p.optional_string(0), true, true), b);
       }},
      {"upper", [](const Value& in, Args& args, Budget& b) {
         Params p("upper", args, {});
         return str_value(upper(to_str(in)), b);
       }},
  };
  return table;
}

std::string_view canonical_filter(std::string_view name) {
  if (name == "d") return "default";
  if (name == "e") return "escape";
  return name;
}

bool odd_or_even(const Value& v, bool odd) {
  if (v.kind() == Kind::Float) {
    const double m = std::fmod(std::fabs(v.as_double()), 2.0);
    return odd ? m == 1.0 : m == 0.0;
  }
  if (!v.is_number()) throw ChatTemplateError("odd/even test: expected a number, not " + type_name(v));
  const bool is_odd = (v.as_int() % 2) != 0;
  return odd ? is_odd : !is_odd;
}

bool same_as(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::None:
    case Kind::Undefined: return a.is_none();
    case Kind::Bool: return a.as_bool() == b.as_bool();
    case Kind::List: return &a.list_data() == &b.list_data();
    case Kind::Dict: return &a.dict_data() == &b.dict_data();
    case Kind::Object: return a.object_data() == b.object_data();
    default: break;
  }
  throw ChatTemplateError("unsupported: 'sameas' on " + type_name(a) + " values (Python object identity)");
}

using TestFn = bool (*)(const Value&, Args&);

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"boolean", [](const Value& v, Args&) { return v.kind() == Kind::Bool; }},
      {"callable", [](const Value& v, Args&) { return v.kind() == Kind::Function; }},
      {"defined", [](const Value& v, Args&) { return !v.is_undefined(); }},
      {"divisibleby", [](const Value& v, Args& args) {
         Params p("divisibleby", args, {"num"});
         const Value& n = p.get(0);
         if (!v.is_number() || !n.is_number()) throw ChatTemplateError("divisibleby test: expected numbers");
         if (v.kind() != Kind::Float && n.kind() != Kind::Float) {
           if (n.as_int() == 0) throw ChatTemplateError("divisibleby test: integer modulo by zero");
           return n.as_int() == -1 || v.as_int() % n.as_int() == 0;
         }
         if (n.as_double() == 0.0) throw ChatTemplateError("divisibleby test: float modulo by zero");
         return std::fmod(v.as_double(), n.as_double()) == 0.0;
       }},
      {"eq", [](const Value& v, Args& args) { return equals(v, Params("eq", args, {"other"}).get(0)); }},
      {"even", [](const Value& v, Args&) { return odd_or_even(v, false); }},
      {"false", [](const Value& v, Args&) { return v.kind() == Kind::Bool && !v.as_bool(); }},
      {"float", [](const Value& v, Args&) { return v.kind() == Kind::Float; }},
      {"ge", [](const Value& v, Args& args) { return compare(v, Params("ge", args, {"other"}).get(0)) >= 0; }},
      {"gt", [](const Value& v, Args& args) { return compare(v, Params("gt", args, {"other"}).get(0)) > 0; }},
      {"in", [](const Value& v, Args& args) { return contains(Params("in", args, {"seq"}).get(0), v); }},
      {"integer", [](const Value& v, Args&) { return v.kind() == Kind::Int; }},
      {"iterable", [](const Value& v, Args&) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }},
      {"le", [](const Value& v, Args& args) { return compare(v, Params("le", args, {"other"}).get(0)) <= 0; }},
      {"lt", [](const Value& v, Args& args) { return compare(v, Params("lt", args, {"other"}).get(0)) < 0; }},
      {"mapping", [](const Value& v, Args&) { return v.is_dict(); }},
      {"ne", [](const Value& v, Args& args) { return !equals(v, Params("ne", args, {"other"}).get(0)); }},
      {"none", [](const Value& v, Args&) { return v.is_none(); }},
      {"number", [](const Value& v, Args&) { return v.is_number(); }},
      {"odd", [](const Value& v, Args&) { return odd_or_even(v, true); }},
      {"sameas", [](const Value& v, Args& args) { return same_as(v, Params("sameas", args, {"other"}).get(0)); }},
      {"sequence", [](const Value& v, Args&) { return v.is_undefined() || v.is_string() || v.is_indexable() || v.is_dict(); }},
      {"string", [](const Value& v, Args&) { return v.is_string(); }},
      {"true", [](const Value& v, Args&) { return v.kind() == Kind::Bool && v.as_bool(); }},
      {"undefined", [](const Value& v, Args&) { return v.is_undefined(); }},
  };
  return table;
}

std::string_view canonical_test(std::string_view name) {
  if (name == "equalto") return "eq";
  if (name == "greaterthan") return "gt";
  if (name == "lessthan") return "lt";
  return name;
}

// Python's slice.indices(): clamps start/stop for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step) {
  const auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (v.kind() != Kind::Int && v.kind() != Kind::Bool) throw ChatTemplateError(std::string("slice ") + what + " must be an integer or None, not " + type_name(v));
    return v.as_int();
  };
  const int64_t st = as_index(step, "step").value_or(1);
  if (st == 0) throw ChatTemplateError("slice step cannot be zero");
  const auto clamp = [&](std::optional<int64_t> i, int64_t fallback) {
    if (!i) return fallback;
    int64_t v = *i;
    if (v < 0) v = std::max<int64_t>(v + n, st < 0 ? -1 : 0);
    return std::min<int64_t>(v, st < 0 ? n - 1 : n);
  };
  const int64_t first = clamp(as_index(start, "start"), st < 0 ? n - 1 : 0);
  const int64_t last = clamp(as_index(stop, "stop"), st < 0 ? -1 : n);
  std::vector<size_t> out;
  for (int64_t i = first; st > 0 ? i < last : i > last; i += st) out.push_back(static_cast<size_t>(i));
  return out;
}

Value make_namespace(const std::string& fn, Args& args, bool as_object) {
  if (args.positional.size() > 1) throw ChatTemplateError(fn + "() takes at most one positional argument");
  std::vector<std::pair<std::string, Value>> attrs;
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (!init.is_dict()) throw ChatTemplateError(fn + "(): the positional argument must be a dict, not " + type_name(init));
    attrs = init.dict_data().entries;
  }
  for (auto& kw : args.keyword) attrs.push_back(kw);
  if (!as_object) return Value::dict(std::move(attrs));
  auto ns = std::make_shared<ObjectData>();
  ns->type_name = "Namespace";
  ns->assignable = true;
  for (auto& attr : attrs) {
    const std::string& name = attr.first;
    if (!name.empty() && name[0] == '_') throw ChatTemplateError("namespace(): underscore-prefixed attribute '" + name + "' is not allowed");
    auto it = std::find_if(ns->attrs.begin(), ns->attrs.end(), [&](const auto& a) { return a.first == name; });
    if (it != ns->attrs.end()) {
      it->second = attr.second;
    } else {
      ns->attrs.push_back(attr);
    }
  }
  return Value::object(std::move(ns));
}

}  // namespace

bool has_filter(std::string_view name) { return filters().count(canonical_filter(name)) > 0; }
bool has_test(std::string_view name) { return tests().count(canonical_test(name)) > 0; }

Value apply_filter(const std::string& name, const Value& input, Args& args, Budget& budget) {
  const std::string_view canonical = canonical_filter(name);
  const auto it = filters().find(canonical);
  if (it == filters().end()) throw ChatTemplateError("unsupported filter '" + name + "'");
  budget.charge(1);
  // jinja2's map, select, reject, selectattr, rejectattr and items return generators: map and the
  // select family yield nothing for a falsy input without looking at their arguments, and every
  // error surfaces only when the generator is consumed. The work is done now, the error kept.
  static const std::string_view kLazy[] = {"items", "map", "reject", "rejectattr", "select", "selectattr"};
  if (std::find(std::begin(kLazy), std::end(kLazy), canonical) == std::end(kLazy)) return it->second(input, args, budget);
  if (canonical != "items" && !truthy(input)) return Value::list({}, Sequence::Generator);
  try {
    return it->second(input, args, budget);
  } catch (const LimitExceeded&) {
    throw;
  } catch (const ChatTemplateError& e) {
    return Value::failed_generator(e.what());
  }
}

bool apply_test(const std::string& name, const Value& input, Args& args) {
  const std::string_view canonical = canonical_test(name);
  const auto it = tests().find(canonical);
  if (it == tests().end()) throw ChatTemplateError("unsupported test '" + name + "'");
  static const std::string_view kWithArgument[] = {"divisibleby", "eq", "ge", "gt", "in", "le", "lt", "ne", "sameas"};
  const bool takes_argument = std::find(std::begin(kWithArgument), std::end(kWithArgument), canonical) != std::end(kWithArgument);
  if (!takes_argument && (!args.positional.empty() || !args.keyword.empty())) {
    throw ChatTemplateError("test '" + name + "' takes no arguments");
  }
  return it->second(input, args);
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::List:
      if (!v.list_data().error.empty()) throw ChatTemplateError(v.list_data().error);
      return v.items();
    case Kind::String: return chars_of(v.str());
    case Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& entry : v.dict_data().entries) keys.push_back(Value::string(entry.first));
      return keys;
    }
    default: break;
  }
  throw ChatTemplateError("'" + type_name(v) + "' object is not iterable");
}

Value get_attr(const Value& object, const std::string& name, Budget& budget) {
  switch (object.kind()) {
    case Kind::Undefined: fail_undefined(object);
    case Kind::Dict: {
      if (auto m = dict_method(object, name, budget)) return *m;
      if (const Value* v = object.dict_data().find(name)) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Kind::String: return string_method(object, name, budget);
    case Kind::List: {
      if (!object.is_indexable()) break;
      if (auto m = list_method(object, name, budget)) return *m;
      return Value::undefined("'" + type_name(object) + " object' has no attribute '" + name + "'");
    }
    case Kind::Object: {
      if (const Value* v = object.object_data()->find(name)) return *v;
      return Value::undefined("'" + type_name(object) + " object' has no attribute '" + name + "'");
    }
    default: break;
  }
  return Value::undefined("'" + type_name(object) + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& object, const Value& key, Budget& budget) {
  if (object.is_undefined()) fail_undefined(object);
  const bool int_key = key.kind() == Kind::Int || key.kind() == Kind::Bool;
  if (object.is_dict() && key.is_string()) {
    if (const Value* v = object.dict_data().find(key.str())) return *v;
  } else if ((object.is_indexable() || object.is_string()) && int_key) {
    const bool is_str = object.is_string();
    const std::u32string cps = is_str ? py::decode_utf8(object.str()) : std::u32string();
    const auto n = static_cast<int64_t>(is_str ? cps.size() : object.items().size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (!is_str) return object.items()[static_cast<size_t>(i)];
      std::string one;
      py::append_utf8(one, cps[static_cast<size_t>(i)]);
      return Value::string(std::move(one));
    }
    return Value::undefined(std::string(is_str ? "string" : "list") + " index out of range");
  }
  // jinja2 falls back to the attribute of that name, so d['items'] is the method when no such key exists.
  if (key.is_string()) return get_attr(object, key.str(), budget);
  return Value::undefined("'" + type_name(object) + " object' has no item " + repr(key));
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step, Budget& budget) {
  if (object.is_undefined()) fail_undefined(object);
  if (object.is_string()) {
    const std::u32string cps = py::decode_utf8(object.str());
    std::u32string out;
    for (const size_t i : slice_indices(static_cast<int64_t>(cps.size()), start, stop, step)) out.push_back(cps[i]);
    return str_value(py::encode_utf8(out), budget);
  }
  if (object.is_indexable()) {
    std::vector<Value> out;
    for (const size_t i : slice_indices(static_cast<int64_t>(object.items().size()), start, stop, step)) out.push_back(object.items()[i]);
    return list_value(std::move(out), budget, object.list_data().seq);
  }
  // jinja2 compiles slices to plain Python subscripts, so unlike a[b] this is an error, not undefined.
  throw ChatTemplateError("'" + type_name(object) + "' object is not subscriptable");
}

std::vector<std::pair<std::string, Value>> make_globals(Budget& budget, std::vector<std::shared_ptr<ObjectData>>& namespaces) {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::function("range", [&budget](Args& args) {
    if (!args.keyword.empty()) throw ChatTemplateError("range() takes no keyword arguments");
    Params p("range", args, {"start", "stop", "step"});
    const bool one = !p.has(1);
    const int64_t start = one ? 0 : p.integer(0, 0);
    const int64_t stop = one ? p.integer(0, 0) : p.integer(1, 0);
    const int64_t step = p.integer(2, 1);
    if (step == 0) throw ChatTemplateError("range() arg 3 must not be zero");
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      // jinja2's sandbox refuses ranges over 100000 items (MAX_RANGE).
      if (out.size() >= 100000) throw ChatTemplateError("range too big: the sandbox allows at most 100000 items");
      out.push_back(Value::integer(i));
    }
    return list_value(std::move(out), budget);
  }));
  g.emplace_back("namespace", Value::function("namespace", [&namespaces](Args& args) {
    Value ns = make_namespace("namespace", args, true);
    namespaces.push_back(ns.object_data());
    return ns;
  }));
  g.emplace_back("dict", Value::function("dict", [](Args& args) { return make_namespace("dict", args, false); }));
  g.emplace_back("raise_exception", Value::function("raise_exception", [](Args& args) -> Value {
    Params p("raise_exception", args, {"message"});
    throw ChatTemplateRaised(to_str(p.get(0)));
  }));
  g.emplace_back("strftime_now", Value::function("strftime_now", [&budget](Args& args) {
    Params p("strftime_now", args, {"format"});
    const std::string format = p.string(0);
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    std::string out(256 + format.size() * 8, '\0');
    const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
    if (n == 0 && !format.empty()) throw ChatTemplateError("strftime_now(): format produced no output or is too long");
    out.resize(n);
    return str_value(std::move(out), budget);
  }));
  return g;
}

}  // namespace orzo::jinja
