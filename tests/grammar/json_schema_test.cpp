// JSON schemas to the language of the JSON texts they accept: valid documents match,
// invalid ones do not, integer ranges are exact, and what cannot be honoured is refused by name.

#include "grammar/automaton.hpp"
#include "grammar/grammar_error.hpp"
#include "grammar/json_schema.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orzo::grammar {
namespace {

Automaton schema(const std::string& s, bool strict = false) { return Automaton::compile(json_schema_grammar(s, strict)); }

struct Case {
  std::string schema;
  std::vector<std::string> yes, no;
};

TEST(JsonSchema, AcceptsValidDocumentsOnly) {
  const std::vector<Case> cases = {
      {R"({"type":"string"})", {R"("")", R"("a b")", R"("\"\\\n\u00e9")", "\"é😀\""}, {"a", R"("\x")", "\"\n\"", R"("\ud800")"}},
      {R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("a\nc")"}, {R"("a")", R"("abcd")"}},
      {R"({"type":"string","pattern":"^[a-z]+\"?$"})", {R"("ab")", R"("ab\"")"}, {R"("aB")", R"("ab"")"}},
      {R"({"type":"string","format":"date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"}},
      {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123")"}},
      {R"({"type":"integer"})", {"0", "-7", "1234567890"}, {"01", "1.0", "-", "+1"}},
      {R"({"type":"number"})", {"0", "-0.5", "3.25e-7", "12E+3"}, {".5", "1.", "--1", "1e"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
      {R"({"type":["integer","null"]})", {"3", "null"}, {"\"3\""}},
      {R"({"enum":["a",1,null,{"k":[true]}]})", {R"("a")", "1", "null", R"({"k":[true]})"}, {R"("b")", "2"}},
      {R"({"const":"x"})", {R"("x")"}, {R"("y")"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1, 2,3]", "[ 1 ]"}, {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]})",
       {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"a": 1, "b": "x"})"}, {R"({"a":1})", R"({"b":"x","a":1})", "{}"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})",
       {"{}", R"({"b":2})", R"({"a":1,"c":3})", R"({"a":1,"b":2,"c":3})"}, {R"({,"b":2})", R"({"a":1,})"}},
      {R"({"type":"object","additionalProperties":false})", {"{}"}, {R"({"a":1})"}},
      {R"({"type":"object"})", {"{}", R"({"any":[1,{"x":null}]})"}, {"[]"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"5", R"("a")"}, {R"("ab")"}},
      {R"({"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}},
           "type":"array","items":{"$ref":"#/$defs/p"}})",
       {R"([{"x":1},{"x":2.5}])"}, {R"([{"y":1}])"}},
      {R"({"type":"object","properties":{"n":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"}}},"required":["n"]})",
       {R"({"n":1,"kids":[{"n":2,"kids":[{"n":3}]}]})"}, {R"({"kids":[]})"}},
      {"true", {"1", R"({"a":[]})"}, {"tru"}},
      {R"({"title":"t","description":"d","default":1,"examples":[2],"type":"integer"})", {"1"}, {"x"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.schema);
    const Automaton dfa = schema(c.schema);
    for (const auto& s : c.yes) EXPECT_TRUE(dfa.matches(s)) << s;
    for (const auto& s : c.no) EXPECT_FALSE(dfa.matches(s)) << s;
  }
}

TEST(JsonSchema, IntegerAndNumberBoundsAreExact) {
  for (const auto& [bounds, lo, hi] : std::vector<std::tuple<std::string, int, int>>{
           {R"("minimum":-37,"maximum":1205)", -37, 1205},
           {R"("exclusiveMinimum":-1,"exclusiveMaximum":10)", 0, 9},
           {R"("minimum":5,"maximum":5)", 5, 5},
           {R"("minimum":99)", 99, 100000},
           {R"("maximum":-3)", -100000, -3}}) {
    SCOPED_TRACE(bounds);
    const Automaton dfa = schema(R"({"type":"integer",)" + bounds + "}");
    for (int v = -2000; v <= 2000; ++v) EXPECT_EQ(dfa.matches(std::to_string(v)), v >= lo && v <= hi) << v;
  }
  const Automaton number = schema(R"({"type":"number","minimum":-2.5,"maximum":3})");
  for (const char* yes : {"-2", "-1.75", "0", "0.999", "2.5", "3"}) EXPECT_TRUE(number.matches(yes)) << yes;
  for (const char* no : {"-3", "3.5", "3.1", "4", "-2.6"}) EXPECT_FALSE(number.matches(no)) << no;
  EXPECT_THROW(schema(R"({"type":"integer","minimum":3,"maximum":2})"), GrammarError);
}

TEST(JsonSchema, JsonObjectIsAnyObject) {
  const Automaton dfa = Automaton::compile(json_object_grammar());
  for (const char* yes : {"{}", R"({"a":1})", R"({"a":{"b":[1,{"c":null}]}, "d":"e"})"}) EXPECT_TRUE(dfa.matches(yes)) << yes;
  for (const char* no : {"[]", "1", R"({"a":})", R"({"a":1,})"}) EXPECT_FALSE(dfa.matches(no)) << no;
}

TEST(JsonSchema, RecursiveReferencesAndValuesOfAnyShapeNestToAnyDepth) {
  const Automaton tree = schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},)"
                                R"("kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},)"
                                R"("$ref":"#/$defs/node"})");
  ASSERT_NE(tree.pushdown(), nullptr);
  std::string deep = R"({"v":0})";
  for (int d = 1; d <= 40; ++d) deep = R"({"v":)" + std::to_string(d) + R"(,"kids":[)" + deep + "]}";
  EXPECT_TRUE(tree.matches(deep));
  EXPECT_FALSE(tree.matches(deep.substr(0, deep.size() - 1)));
  EXPECT_FALSE(tree.matches(R"({"v":0,"kids":[{"kids":[]}]})"));  // an inner node without v
  EXPECT_FALSE(tree.matches(R"({"v":0,"kids":[{"v":1,"w":2}]})"));  // an inner node not closed
  std::string any = "1";
  for (int d = 0; d < 60; ++d) any = d % 2 ? "[" + any + ", null]" : R"({"k": )" + any + "}";
  EXPECT_TRUE(schema("{}").matches(any));
  EXPECT_TRUE(schema(R"({"type":"array"})").matches("[" + any + "]"));
  // Without recursion or free values a schema stays a byte DFA.
  EXPECT_NE(schema(R"({"type":"object","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}})").dfa(), nullptr);
}

// The costliest realistic schema measured for ByteDfa::kMaxWork, 40 optional properties
// (any subset, in order: 35 M of the 64 M steps), stays within it.
TEST(JsonSchema, FortyOptionalPropertiesCompile) {
  std::string properties;
  for (int i = 0; i < 40; ++i) properties += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\":{\"type\":\"integer\"}";
  const Automaton a = schema("{\"type\":\"object\",\"properties\":{" + properties + "}}");
  ASSERT_NE(a.dfa(), nullptr);
  EXPECT_TRUE(a.dfa()->matches(R"({"p3":1,"p39":-2})"));
  EXPECT_FALSE(a.dfa()->matches(R"({"p39":1,"p3":2})"));
}

TEST(JsonSchema, StrictModeWantsClosedObjectsWithEveryPropertyRequired) {
  const std::string ok = R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false})";
  EXPECT_NO_THROW(schema(ok, true));
  try {
    schema(R"({"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false})", true);
    ADD_FAILURE() << "accepted";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("'a' is not"), std::string::npos) << e.what();
  }
  EXPECT_THROW(schema(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})", true), GrammarError);
}

TEST(JsonSchema, RefusesByNameAndPlace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not valid JSON"},
      {"3", "must be an object or a boolean"},
      {R"({"type":"strin"})", "unknown type 'strin'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems' is not supported (at #/uniqueItems)"},
      {R"({"properties":{"a":{"not":{}}}})", "(at #/properties/a/not)"},
      {R"({"$ref":"#/$defs/missing"})", "points at nothing"},
      {R"({"$ref":"http://example.com/s.json"})", "same document"},
      {R"({"type":"string","format":"hostname"})", "format 'hostname'"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreference"},
      {R"({"type":"string","minLength":3,"maxLength":1})", "maxLength is below minLength"},
      {R"({"enum":[]})", "non-empty"},
      {"false", "matches nothing"},
  };
  for (const auto& [text, says] : cases) {
    SCOPED_TRACE(text);
    try {
      schema(text);
      ADD_FAILURE() << "accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace orzo::grammar
