#pragma once
// What a template can call without defining it: jinja2's filters and tests (the subset chat
// templates use, with HF's tojson), the Python methods of str, dict and list, the globals HF
// installs (namespace, raise_exception, strftime_now, dict) plus range, and jinja2's rules for
// `a.b` and `a[b]` lookups. A name outside the implemented subset is refused, never guessed at.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat_template/jinja_budget.hpp"
#include "chat_template/jinja_value.hpp"

namespace orzo::jinja {

bool has_filter(std::string_view name);
bool has_test(std::string_view name);
Value apply_filter(const std::string& name, const Value& input, Args& args, Budget& budget);
bool apply_test(const std::string& name, const Value& input, Args& args);

Value get_attr(const Value& object, const std::string& name, Budget& budget);  // object.name
Value get_item(const Value& object, const Value& key, Budget& budget);         // object[key]
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step, Budget& budget);

// Iterating a value as a for loop does: list items, dict keys, string characters; undefined is empty.
std::vector<Value> iterate(const Value& v);

// Every namespace() the template creates is appended to `namespaces`: being mutable, they are
// the only values that can end up containing themselves, and the renderer clears them at the
// end to break such reference cycles.
std::vector<std::pair<std::string, Value>> make_globals(Budget& budget, std::vector<std::shared_ptr<ObjectData>>& namespaces);

}  // namespace orzo::jinja
