#include "chat_template/jinja_value.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat_template/chat_template_error.hpp"
#include "chat_template/py_string.hpp"

namespace orzo::jinja {

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Value* ObjectData::find(std::string_view name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

namespace {

int checked_depth(int child_depth) {
  if (child_depth + 1 > kMaxValueDepth) {
    throw ChatTemplateError("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
  return child_depth + 1;
}

}  // namespace

Value Value::undefined(std::string what) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(what));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.data_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.data_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.data_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.data_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, Sequence seq) {
  int child = 0;
  for (const Value& item : items) child = std::max(child, item.depth());
  auto data = std::make_shared<ListData>();
  data->depth = checked_depth(child);
  data->items = std::move(items);
  data->seq = seq;
  Value v;
  v.kind_ = Kind::List;
  v.data_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}

Value Value::dict(std::vector<std::pair<std::string, Value>> entries) {
  auto data = std::make_shared<DictData>();
  int child = 0;
  for (auto& entry : entries) {
    child = std::max(child, entry.second.depth());
    auto it = std::find_if(data->entries.begin(), data->entries.end(), [&](const auto& e) { return e.first == entry.first; });
    if (it != data->entries.end()) {
      it->second = std::move(entry.second);
    } else {
      data->entries.push_back(std::move(entry));
    }
  }
  data->depth = checked_depth(child);
  Value v;
  v.kind_ = Kind::Dict;
  v.data_ = std::shared_ptr<const DictData>(std::move(data));
  return v;
}

Value Value::failed_generator(std::string error) {
  auto data = std::make_shared<ListData>();
  data->seq = Sequence::Generator;
  data->error = std::move(error);
  Value v;
  v.kind_ = Kind::List;
  v.data_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}

Value Value::object(std::shared_ptr<ObjectData> object) {
  Value v;
  v.kind_ = Kind::Object;
  v.data_ = std::move(object);
  return v;
}

Value Value::function(std::string name, std::function<Value(Args&)> call) {
  Value v;
  v.kind_ = Kind::Function;
  v.data_ = std::make_shared<const Function>(Function{std::move(name), std::move(call)});
  return v;
}

int64_t Value::as_int() const {
  if (kind_ == Kind::Bool) return as_bool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind_ == Kind::Float) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const std::string& Value::undefined_message() const {
  static const std::string anonymous = "value is undefined";
  const auto* message = std::get_if<std::shared_ptr<const std::string>>(&data_);
  return message != nullptr ? **message : anonymous;
}

int Value::depth() const {
  if (kind_ == Kind::List) return list_data().depth;
  if (kind_ == Kind::Dict) return dict_data().depth;
  return 0;
}

void fail_undefined(const Value& v) { throw ChatTemplateError(v.undefined_message()); }

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List:
      switch (v.list_data().seq) {
        case Sequence::List: return "list";
        case Sequence::Tuple: return "tuple";
        case Sequence::Generator: return "generator";
        case Sequence::DictKeys: return "dict_keys";
        case Sequence::DictValues: return "dict_values";
        case Sequence::DictItems: return "dict_items";
      }
      return "list";
    case Kind::Dict: return "dict";
    case Kind::Object: return v.object_data()->type_name;
    case Kind::Function: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.as_bool();
    case Kind::Int: return v.as_int() != 0;
    case Kind::Float: return v.as_double() != 0.0;
    case Kind::String: return !v.str().empty();
    case Kind::List: return v.list_data().seq == Sequence::Generator || !v.items().empty();
    case Kind::Dict: return !v.dict_data().entries.empty();
    case Kind::Object:
    case Kind::Function: return true;
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "";
    case Kind::String: return v.str();
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "None";
    case Kind::Bool: return v.as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: return py::float_repr(v.as_double());
    case Kind::String: return py::repr(v.str());
    case Kind::List: {
      const ListData& l = v.list_data();
      if (l.seq == Sequence::Generator) {
        throw ChatTemplateError("unsupported: printing a generator (jinja2 prints its memory address); apply |list first");
      }
      const bool tuple = l.seq == Sequence::Tuple;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += repr(l.items[i]);
      }
      if (tuple && l.items.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      if (l.seq == Sequence::List || tuple) return out;
      return type_name(v) + "(" + out + ")";
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.dict_data().entries) {
        if (!first) out += ", ";
        first = false;
        out += py::repr(key) + ": " + repr(value);
      }
      return out + "}";
    }
    case Kind::Function:
      throw ChatTemplateError("unsupported: converting the function '" + v.function_data().name + "' to text (jinja2 prints its memory address)");
    case Kind::Object: break;
  }
  throw ChatTemplateError("unsupported: converting a " + type_name(v) + " object to text");
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::List: {
      const Sequence seq = a.list_data().seq;
      if (seq != b.list_data().seq || a.items().size() != b.items().size()) return false;
      if (seq == Sequence::Generator || seq == Sequence::DictValues) return &a.list_data() == &b.list_data();
      if (seq == Sequence::DictKeys || seq == Sequence::DictItems) {
        // Set-like views: equal when they hold the same elements in any order.
        for (const Value& x : a.items()) {
          bool found = false;
          for (const Value& y : b.items()) found = found || equals(x, y);
          if (!found) return false;
        }
        return true;
      }
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!equals(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      const auto& ea = a.dict_data().entries;
      if (ea.size() != b.dict_data().entries.size()) return false;
      for (const auto& [key, value] : ea) {
        const Value* other = b.dict_data().find(key);
        if (other == nullptr || !equals(value, *other)) return false;
      }
      return true;
    }
    case Kind::Object: return a.object_data() == b.object_data();
    case Kind::Function: return &a.function_data() == &b.function_data();
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) {
      const double x = a.as_double();
      const double y = b.as_double();
      return x < y ? -1 : (y < x ? 1 : 0);
    }
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    return x < y ? -1 : (y < x ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_indexable() && b.is_indexable() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw ChatTemplateError("ordering not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) throw ChatTemplateError("integer in context exceeds 64 bits: " + j.dump());
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<std::string, Value>> entries;
      entries.reserve(j.size());
      for (const auto& [key, value] : j.items()) entries.emplace_back(key, from_json(value));
      return Value::dict(std::move(entries));
    }
    default: break;
  }
  throw ChatTemplateError("unsupported JSON value in the template context: " + std::string(j.type_name()));
}

namespace {

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
  for (const char32_t c : py::decode_utf8(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c >= 0x10000) {
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      py::append_utf8(out, c);
    }
  }
  out.push_back('"');
}

void append_newline_indent(std::string& out, const JsonOptions& o, int level) {
  out.push_back('\n');
  for (int i = 0; i < level; ++i) out += *o.indent;
}

void append_json(std::string& out, const Value& v, const JsonOptions& o, int level) {
  switch (v.kind()) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.as_int()); return;
    case Kind::Float: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d < 0 ? "-Infinity" : "Infinity";
      } else {
        out += py::float_repr(d);
      }
      return;
    }
    case Kind::String: append_json_string(out, v.str(), o.ensure_ascii); return;
    case Kind::List: {
      if (!v.is_indexable()) break;
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += o.item_separator;
        if (o.indent) append_newline_indent(out, o, level + 1);
        append_json(out, items[i], o, level + 1);
      }
      if (o.indent) append_newline_indent(out, o, level);
      out.push_back(']');
      return;
    }
    case Kind::Dict: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.dict_data().entries) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys) {
        std::sort(entries.begin(), entries.end(), [](const auto* x, const auto* y) { return x->first < y->first; });
      }
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += o.item_separator;
        if (o.indent) append_newline_indent(out, o, level + 1);
        append_json_string(out, entries[i]->first, o.ensure_ascii);
        out += o.key_separator;
        append_json(out, entries[i]->second, o, level + 1);
      }
      if (o.indent) append_newline_indent(out, o, level);
      out.push_back('}');
      return;
    }
    default: break;
  }
  throw ChatTemplateError("tojson: object of type " + type_name(v) + " is not JSON serializable");
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  append_json(out, v, options, 0);
  return out;
}

}  // namespace orzo::jinja
