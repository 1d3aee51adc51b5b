#include "grammar/json_schema.hpp"

#include "core/ordered_json.hpp"
#include "grammar/grammar_error.hpp"
#include "grammar/regex_parser.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace orzo::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Integers and integer parts are written with at most 16 digits: this is the largest.
constexpr int64_t kMaxMagnitude = 9999999999999999;

RegexPtr seq(std::initializer_list<RegexPtr> parts) { return concat(std::vector<RegexPtr>(parts)); }
RegexPtr separator() {
  static const RegexPtr s = seq({json_space(), literal(","), json_space()});
  return s;
}
RegexPtr digit() {
  static const RegexPtr d = chars(CharSet::range('0', '9'));
  return d;
}

RegexPtr string_char() {
  static const RegexPtr c = [] {
    CharSet plain = CharSet::all().minus(CharSet::range(0, 0x1F));
    plain = plain.minus(CharSet::single('"')).minus(CharSet::single('\\'));
    return alt({chars(plain),
                parse_regex(R"(\\(?:["\\/bfnrt]|u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})))")});
  }();
  return c;
}

RegexPtr quoted(RegexPtr content) { return seq({literal("\""), std::move(content), literal("\"")}); }
RegexPtr any_string() {
  static const RegexPtr s = quoted(star(string_char()));
  return s;
}
RegexPtr any_number() {
  static const RegexPtr n = parse_regex(R"(-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,16})?(?:[eE][+-]?[0-9]{1,3})?)");
  return n;
}
RegexPtr any_integer() {
  static const RegexPtr n = parse_regex(R"(-?(?:0|[1-9][0-9]{0,15}))");
  return n;
}
RegexPtr fraction() {
  static const RegexPtr f = parse_regex(R"(\.[0-9]{1,16})");
  return f;
}

// The members of a JSON object whose values are `value`, between its braces.
RegexPtr object_of(const RegexPtr& value) {
  const RegexPtr pair = seq({any_string(), json_space(), literal(":"), json_space(), value});
  return seq({literal("{"), json_space(), separated(pair, separator(), false), json_space(), literal("}")});
}

// Digit strings of a's length from a to b (a <= b, same length), leading zeros allowed.
RegexPtr fixed_range(const std::string& a, const std::string& b) {
  if (a.empty()) return empty_string();
  const size_t rest = a.size() - 1;
  const std::string ta = a.substr(1), tb = b.substr(1);
  if (ta == std::string(rest, '0') && tb == std::string(rest, '9'))
    return seq({chars(CharSet::range(static_cast<uint8_t>(a[0]), static_cast<uint8_t>(b[0]))), repeat(digit(), static_cast<int32_t>(rest), static_cast<int32_t>(rest))});
  if (a[0] == b[0]) return seq({literal(a.substr(0, 1)), fixed_range(ta, tb)});
  std::vector<RegexPtr> options{seq({literal(a.substr(0, 1)), fixed_range(ta, std::string(rest, '9'))})};
  if (b[0] - a[0] > 1)
    options.push_back(seq({chars(CharSet::range(static_cast<uint8_t>(a[0] + 1), static_cast<uint8_t>(b[0] - 1))),
                           repeat(digit(), static_cast<int32_t>(rest), static_cast<int32_t>(rest))}));
  options.push_back(seq({literal(b.substr(0, 1)), fixed_range(std::string(rest, '0'), tb)}));
  return alt(std::move(options));
}

// The decimal forms, without leading zeros, of the integers lo..hi (0 <= lo <= hi).
RegexPtr natural_range(int64_t lo, int64_t hi) {
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  std::vector<RegexPtr> options;
  for (size_t n = a.size(); n <= b.size(); ++n) {
    const std::string from = n == a.size() ? a : "1" + std::string(n - 1, '0');
    const std::string to = n == b.size() ? b : std::string(n, '9');
    options.push_back(fixed_range(from, to));
  }
  return alt(std::move(options));
}

// The integers lo..hi, signs included (nothing when lo > hi).
RegexPtr integer_range(int64_t lo, int64_t hi) {
  std::vector<RegexPtr> options;
  if (hi >= 0 && lo <= hi) options.push_back(natural_range(std::max<int64_t>(lo, 0), hi));
  if (lo < 0 && lo <= hi) options.push_back(seq({literal("-"), natural_range(std::max<int64_t>(1, -hi), -lo)}));
  return alt(std::move(options));
}

class Compiler {
 public:
  Compiler(const Json& root, bool strict, Grammar& grammar) : root_(root), strict_(strict), grammar_(grammar) {}

  RegexPtr compile(const Json& s, const std::string& at) {
    if (s.is_boolean()) return s.get<bool>() ? any_value() : nothing();
    if (!s.is_object()) fail(at, "a schema must be an object or a boolean");
    check_keywords(s, at);
    if (s.contains("$ref")) return reference(s, at);
    if (s.contains("const")) return literal(s["const"].dump());
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) fail(at + "/enum", "enum must be a non-empty array");
      std::vector<RegexPtr> options;
      for (const auto& v : s["enum"]) options.push_back(literal(v.dump()));
      return alt(std::move(options));
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) {
        if (!s[key].is_array() || s[key].empty()) fail(at + "/" + key, std::string(key) + " must be a non-empty array");
        std::vector<RegexPtr> options;
        for (size_t i = 0; i < s[key].size(); ++i)
          options.push_back(compile(merged(s, key, s[key][i]), at + "/" + key + "/" + std::to_string(i)));
        return alt(std::move(options));
      }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].size() != 1) fail(at + "/allOf", "allOf is supported with one schema only");
      return compile(merged(s, "allOf", s["allOf"][0]), at + "/allOf/0");
    }
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) return object(s, at);
      if (s.contains("items")) return array(s, at);
      if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) return string(s, at);
      return any_value();
    }
    const Json& type = s["type"];
    if (type.is_array()) {
      if (type.empty()) fail(at + "/type", "type must not be an empty list");
      std::vector<RegexPtr> options;
      for (const auto& t : type) options.push_back(typed(s, t, at));
      return alt(std::move(options));
    }
    return typed(s, type, at);
  }

 private:
  [[noreturn]] static void fail(const std::string& at, const std::string& what) {
    throw GrammarError("JSON schema: " + what + " (at " + at + ")");
  }

  // A branch of anyOf/oneOf/allOf with its parent's other keywords (a type beside anyOf, say).
  static Json merged(const Json& parent, const char* key, const Json& branch) {
    if (!branch.is_object()) return branch;
    Json out = branch;
    for (const auto& [k, v] : parent.items())
      if (k != key && !out.contains(k) && k != "$defs" && k != "definitions") out[k] = v;
    return out;
  }

  static void check_keywords(const Json& s, const std::string& at) {
    static const std::set<std::string> unsupported = {
        "not", "if", "then", "else", "uniqueItems", "contains", "minContains", "maxContains", "patternProperties",
        "propertyNames", "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties",
        "unevaluatedItems", "minProperties", "maxProperties", "multipleOf", "prefixItems", "$dynamicRef",
        "$recursiveRef"};
    for (const auto& [key, value] : s.items())
      if (unsupported.count(key)) fail(at + "/" + key, "'" + key + "' is not supported");
  }

  RegexPtr reference(const Json& s, const std::string& at) {
    if (!s["$ref"].is_string()) fail(at + "/$ref", "$ref must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    if (ref.empty() || ref[0] != '#') fail(at + "/$ref", "only references into the same document (#...) are supported, got '" + ref + "'");
    const Json* target = &root_;
    try {
      if (ref.size() > 1) target = &root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const nlohmann::json::exception&) {
      fail(at + "/$ref", "the reference '" + ref + "' points at nothing");
    }
    // A rule of the grammar, made before its body so that the body may name it.
    if (const auto it = ref_rules_.find(ref); it != ref_rules_.end()) return rule(it->second);
    const int32_t r = grammar_.add(ref);
    ref_rules_.emplace(ref, r);
    grammar_.define(r, compile(*target, ref));
    return rule(r);
  }

  RegexPtr typed(const Json& s, const Json& type, const std::string& at) {
    if (!type.is_string()) fail(at + "/type", "type must be a string or a list of strings");
    const std::string t = type.get<std::string>();
    if (t == "object") return object(s, at);
    if (t == "array") return array(s, at);
    if (t == "string") return string(s, at);
    if (t == "integer") return integer(s, at);
    if (t == "number") return number(s, at);
    if (t == "boolean") return alt({literal("true"), literal("false")});
    if (t == "null") return literal("null");
    fail(at + "/type", "unknown type '" + t + "'");
  }

  static int32_t count(const Json& s, const char* key, const std::string& at, int32_t fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000)
      fail(at + "/" + key, std::string(key) + " must be an integer in [0, 100000]");
    return static_cast<int32_t>(v.get<int64_t>());
  }

  RegexPtr string(const Json& s, const std::string& at) {
    const int32_t min = count(s, "minLength", at, 0), max = count(s, "maxLength", at, -1);
    if (max >= 0 && max < min) fail(at, "maxLength is below minLength");
    const bool bounded = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (bounded) fail(at, "pattern together with minLength or maxLength is not supported");
      if (!s["pattern"].is_string()) fail(at + "/pattern", "pattern must be a string");
      // A pattern matches anywhere in the string; generating a full match is one way to do so.
      std::string p = s["pattern"].get<std::string>();
      try {
        return quoted(json_escaped(parse_regex(p)));
      } catch (const GrammarError& e) {
        fail(at + "/pattern", e.what());
      }
    }
    if (s.contains("format")) {
      if (bounded) fail(at, "format together with minLength or maxLength is not supported");
      static const std::map<std::string, std::string> formats = {
          {"date", R"([0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01]))"},
          {"time", R"((?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"},
          {"date-time",
           R"([0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"},
          {"uuid", R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"},
          {"email", R"([a-zA-Z0-9._%+-]{1,64}@[a-zA-Z0-9-]{1,63}(?:\.[a-zA-Z0-9-]{1,63}){0,4}\.[a-zA-Z]{2,24})"},
      };
      const auto name = s["format"].is_string() ? s["format"].get<std::string>() : std::string();
      const auto it = formats.find(name);
      if (it == formats.end()) fail(at + "/format", "the format '" + name + "' is not supported");
      return quoted(parse_regex(it->second));
    }
    return quoted(repeat(string_char(), min, max));
  }

  static bool is_bound(const Json& s, const char* key, const std::string& at) {
    if (!s.contains(key)) return false;
    if (!s[key].is_number()) fail(at + "/" + key, std::string(key) + " must be a number");
    return true;
  }

  // The integer bounds of the schema's range: inclusive, clamped to kMaxMagnitude.
  static std::pair<int64_t, int64_t> integer_bounds(const Json& s, const std::string& at) {
    double lo = -static_cast<double>(kMaxMagnitude), hi = static_cast<double>(kMaxMagnitude);
    if (is_bound(s, "minimum", at)) lo = std::max(lo, std::ceil(s["minimum"].get<double>()));
    if (is_bound(s, "exclusiveMinimum", at)) lo = std::max(lo, std::floor(s["exclusiveMinimum"].get<double>()) + 1);
    if (is_bound(s, "maximum", at)) hi = std::min(hi, std::floor(s["maximum"].get<double>()));
    if (is_bound(s, "exclusiveMaximum", at)) hi = std::min(hi, std::ceil(s["exclusiveMaximum"].get<double>()) - 1);
    if (lo > hi) fail(at, "no integer lies within its minimum and maximum");
    return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  }

  static bool bounded_number(const Json& s) {
    return s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum");
  }

  RegexPtr integer(const Json& s, const std::string& at) {
    if (!bounded_number(s)) return any_integer();
    const auto [lo, hi] = integer_bounds(s, at);
    return integer_range(lo, hi);
  }

  // Within bounds: the integers of the range, and fractions after an integer part I only
  // where I + (0, 1) (or -I - (0, 1)) stays inside it.
  RegexPtr number(const Json& s, const std::string& at) {
    if (!bounded_number(s)) return any_number();
    const auto [lo, hi] = integer_bounds(s, at);
    std::vector<RegexPtr> options{integer_range(lo, hi)};
    if (std::max<int64_t>(lo, 0) <= hi - 1) options.push_back(seq({natural_range(std::max<int64_t>(lo, 0), hi - 1), fraction()}));
    if (std::max<int64_t>(1, -hi) <= -lo - 1) options.push_back(seq({literal("-"), natural_range(std::max<int64_t>(1, -hi), -lo - 1), fraction()}));
    return alt(std::move(options));
  }

  RegexPtr array(const Json& s, const std::string& at) {
    const int32_t min = count(s, "minItems", at, 0), max = count(s, "maxItems", at, -1);
    if (max >= 0 && max < min) fail(at, "maxItems is below minItems");
    const RegexPtr item = s.contains("items") ? compile(s["items"], at + "/items") : any_value();
    const RegexPtr open = seq({literal("["), json_space()}), close = seq({json_space(), literal("]")});
    if (max == 0) return seq({open, close});
    if (max < 0 && min <= 1) return seq({open, separated(item, separator(), min == 1), close});
    const RegexPtr more = repeat(seq({separator(), item}), std::max(min - 1, 0), max < 0 ? -1 : max - 1);
    const RegexPtr some = seq({item, more});
    return seq({open, min == 0 ? optional(some) : some, close});
  }

  RegexPtr object(const Json& s, const std::string& at) {
    const Json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    const bool closed = additional && additional->is_boolean() && !additional->get<bool>();
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(at + "/required", "required must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(at + "/required", "required must be an array of names");
        required.insert(r.get<std::string>());
      }
    }
    const Json properties = s.contains("properties") ? s["properties"] : Json::object();
    if (!properties.is_object()) fail(at + "/properties", "properties must be an object");
    for (const auto& name : required)
      if (!properties.contains(name) && closed) fail(at + "/required", "'" + name + "' is required but not allowed");
    if (strict_) {
      if (!closed) fail(at, "in strict mode every object must set additionalProperties to false");
      for (const auto& [name, _] : properties.items())
        if (!required.count(name)) fail(at + "/required", "in strict mode every property must be required; '" + name + "' is not");
    }
    const RegexPtr open = seq({literal("{"), json_space()}), close = seq({json_space(), literal("}")});
    if (properties.empty() && required.empty()) {
      if (closed) return seq({open, close});
      const RegexPtr value = additional && !additional->is_boolean() ? compile(*additional, at + "/additionalProperties")
                                                                     : any_value();
      return object_of(value);
    }
    struct Member {
      RegexPtr pair;
      bool required;
    };
    std::vector<Member> members;
    for (const auto& [name, schema] : properties.items()) {
      const RegexPtr value = compile(schema, at + "/properties/" + name);
      members.push_back({seq({literal(Json(name).dump()), json_space(), literal(":"), json_space(), value}), required.count(name) > 0});
    }
    // A required name with no schema of its own (the object is open): any value.
    for (const auto& name : required)
      if (!properties.contains(name))
        members.push_back({seq({literal(Json(name).dump()), json_space(), literal(":"), json_space(), any_value()}), true});
    size_t first_required = members.size();
    for (size_t i = 0; i < members.size() && first_required == members.size(); ++i)
      if (members[i].required) first_required = i;
    std::vector<RegexPtr> body;
    if (first_required < members.size()) {
      for (size_t i = 0; i < first_required; ++i) body.push_back(optional(seq({members[i].pair, separator()})));
      body.push_back(members[first_required].pair);
      for (size_t i = first_required + 1; i < members.size(); ++i) {
        const RegexPtr next = seq({separator(), members[i].pair});
        body.push_back(members[i].required ? next : optional(next));
      }
      return seq({open, concat(std::move(body)), close});
    }
    // All optional: whichever comes first has no comma before it.
    std::vector<RegexPtr> firsts;
    for (size_t k = 0; k < members.size(); ++k) {
      std::vector<RegexPtr> rest{members[k].pair};
      for (size_t i = k + 1; i < members.size(); ++i) rest.push_back(optional(seq({separator(), members[i].pair})));
      firsts.push_back(concat(std::move(rest)));
    }
    return seq({open, optional(alt(std::move(firsts))), close});
  }

  RegexPtr any_value() { return any_json_value(grammar_); }

  const Json& root_;
  bool strict_;
  Grammar& grammar_;
  std::map<std::string, int32_t> ref_rules_;
};

// How a JSON string writes a character JSON will not take as itself.
std::string json_escape(uint32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: break;
  }
  static const char* hex = "0123456789abcdef";
  return std::string("\\u00") + hex[(c >> 4) & 0xF] + hex[c & 0xF];
}

}  // namespace

RegexPtr json_space() {
  static const RegexPtr w = optional(literal(" "));
  return w;
}

RegexPtr json_escaped(const RegexPtr& content) {
  switch (content->kind) {
    case Regex::Kind::chars: {
      CharSet special = CharSet::range(0, 0x1F);
      special.add('"', '"');
      special.add('\\', '\\');
      std::vector<RegexPtr> options;
      const CharSet plain = content->chars.minus(special);
      if (!plain.empty()) options.push_back(chars(plain));
      for (const auto& [lo, hi] : content->chars.ranges())
        for (uint32_t c = lo; c <= hi && c <= 0x5C; ++c)
          if (special.contains(c)) options.push_back(literal(json_escape(c)));
      return alt(std::move(options));
    }
    case Regex::Kind::concat:
    case Regex::Kind::alt: {
      std::vector<RegexPtr> parts;
      for (const auto& p : content->parts) parts.push_back(json_escaped(p));
      return content->kind == Regex::Kind::concat ? concat(std::move(parts)) : alt(std::move(parts));
    }
    case Regex::Kind::repeat: return repeat(json_escaped(content->parts.front()), content->min, content->max);
    case Regex::Kind::separated:
      return separated(json_escaped(content->parts[0]), json_escaped(content->parts[1]), content->min > 0);
    case Regex::Kind::rule: break;  // a pattern names no rules
  }
  return content;
}

RegexPtr any_json_value(Grammar& grammar) {
  static const std::string kName = "any JSON value";
  int32_t r = grammar.find(kName);
  if (r < 0) {
    r = grammar.add(kName);
    const RegexPtr value = rule(r);
    grammar.define(r, alt({any_string(), any_number(), literal("true"), literal("false"), literal("null"), object_of(value),
                           seq({literal("["), json_space(), separated(value, separator(), false), json_space(), literal("]")})}));
  }
  return rule(r);
}

RegexPtr json_schema_value(const std::string& schema, bool strict, Grammar& grammar) {
  Json root;
  try {
    root = parse_ordered_json(schema);
  } catch (const JsonSyntaxError& e) {
    throw GrammarError(std::string("JSON schema: not valid JSON: ") + e.what());
  }
  return Compiler(root, strict, grammar).compile(root, "#");
}

Grammar json_schema_grammar(const std::string& schema, bool strict) {
  return rooted([&](Grammar& g) { return seq({json_space(), json_schema_value(schema, strict, g), json_space()}); });
}

RegexPtr json_object_value(Grammar& grammar) { return object_of(any_json_value(grammar)); }

Grammar json_object_grammar() {
  return rooted([](Grammar& g) { return seq({json_space(), json_object_value(g), json_space()}); });
}

}  // namespace orzo::grammar
