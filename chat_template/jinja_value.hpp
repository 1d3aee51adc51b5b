#pragma once
// The dynamic value of the Jinja interpreter, with the Python semantics jinja2 inherits:
// truthiness, ==, ordering, str() and repr() formatting, and json.dumps as HF's tojson calls it.
// Values are immutable and cheap to copy (containers are shared); the only mutable things are
// objects whose attributes a template may assign, i.e. namespace(). Dicts keep insertion order,
// as Python's do, because tojson and items() print them in that order.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace orzo::jinja {

class Value;

// Containers deeper than this are refused: printing, comparing and freeing them recurse.
inline constexpr int kMaxValueDepth = 256;

// Python's sequence-like types differ in how they print, compare and index, so a list value
// remembers which one it stands for. Generators come from jinja2's lazy filters (map, select,
// items, ...); the views from dict.keys()/values()/items().
enum class Sequence { List, Tuple, Generator, DictKeys, DictValues, DictItems };

struct ListData {
  std::vector<Value> items;
  Sequence seq = Sequence::List;
  int depth = 1;
  std::string error;  // a generator whose computation failed: consuming it raises this
};

struct DictData {
  std::vector<std::pair<std::string, Value>> entries;  // insertion order, unique keys
  int depth = 1;
  const Value* find(std::string_view key) const;
};

// An object with named attributes: namespace() (assignable) and the loop variable.
struct ObjectData {
  std::string type_name;
  bool assignable = false;
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* find(std::string_view name) const;
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Function {
  std::string name;
  std::function<Value(Args&)> call;
};

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Object, Function };

class Value {
 public:
  Value() = default;  // undefined, with no name to report
  static Value undefined(std::string what);  // what: the message a use of it reports
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, Sequence seq = Sequence::List);
  static Value dict(std::vector<std::pair<std::string, Value>> entries);  // later duplicates overwrite earlier ones
  // jinja2's lazy filters fail only when their generator is consumed.
  static Value failed_generator(std::string error);
  static Value object(std::shared_ptr<ObjectData> object);
  static Value function(std::string name, std::function<Value(Args&)> call);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::List && list_data().seq == Sequence::Tuple; }
  // A list or tuple: indexable, sliceable, concatenable (generators and dict views are not).
  bool is_indexable() const { return kind_ == Kind::List && (list_data().seq == Sequence::List || list_data().seq == Sequence::Tuple); }
  bool is_dict() const { return kind_ == Kind::Dict; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // bool or int
  double as_double() const;  // bool, int or float
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const ListData& list_data() const { return *std::get<std::shared_ptr<const ListData>>(data_); }
  const std::vector<Value>& items() const { return list_data().items; }
  const DictData& dict_data() const { return *std::get<std::shared_ptr<const DictData>>(data_); }
  const std::shared_ptr<ObjectData>& object_data() const { return std::get<std::shared_ptr<ObjectData>>(data_); }
  const Function& function_data() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  const std::string& undefined_message() const;
  int depth() const;  // nesting depth of containers, 0 for scalars

 private:
  Kind kind_ = Kind::Undefined;
  std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>, std::shared_ptr<const ListData>,
               std::shared_ptr<const DictData>, std::shared_ptr<ObjectData>, std::shared_ptr<const Function>>
      data_;
};

// Using an undefined value for anything but printing, testing or iterating is an error in jinja2.
[[noreturn]] void fail_undefined(const Value& v);

std::string type_name(const Value& v);  // Python's type name, for messages
bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v), which is what {{ v }} prints
std::string repr(const Value& v);
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // <0, 0, >0; throws for unorderable types (Python TypeError)

Value from_json(const nlohmann::ordered_json& j);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);  // json.dumps

}  // namespace orzo::jinja
