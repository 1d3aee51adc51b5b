// GBNF grammars (llama.cpp's format) to automata: byte DFAs, or pushdown automata where rules recur.

#include "grammar/automaton.hpp"
#include "grammar/gbnf.hpp"
#include "grammar/grammar_error.hpp"

#include <gtest/gtest.h>

namespace orzo::grammar {
namespace {

Automaton gbnf(const std::string& g) { return Automaton::compile(parse_gbnf(g)); }

TEST(Gbnf, RulesClassesAndRepetitions) {
  const Automaton dfa = gbnf(R"(
# a comment
root ::= greeting ", " name ("!" | "?")?
greeting ::= "hello" | "hi"   # trailing comment
name ::= [A-Z] [a-z]{1,8}
)");
  for (const char* yes : {"hello, Bob", "hi, Alice!", "hi, Zo?"}) EXPECT_TRUE(dfa.matches(yes)) << yes;
  for (const char* no : {"hello, bob", "hey, Bob", "hi, B", "hi, Bobbobbobb"}) EXPECT_FALSE(dfa.matches(no)) << no;
}

TEST(Gbnf, AlternativesContinueAfterABarAndInsideParentheses) {
  const Automaton dfa = gbnf("root ::= \"a\" |\n  \"b\" | (\n \"c\"\n \"d\" )\nother ::= \"x\"");
  for (const char* yes : {"a", "b", "cd"}) EXPECT_TRUE(dfa.matches(yes)) << yes;
  EXPECT_FALSE(dfa.matches("x"));
}

TEST(Gbnf, EscapesAndAnyCharacter) {
  const Automaton dfa = gbnf(R"(root ::= "\"" [^"\\\n]* "\"" "\x41\u00e9" . [\]\-]+)");
  EXPECT_TRUE(dfa.matches("\"ab c\"Aé😀]-"));
  EXPECT_FALSE(dfa.matches("\"a\"b\"Aé!]"));
}

TEST(Gbnf, RecursionNestsAsDeepAsTheOutput) {
  const Automaton a = gbnf(R"(root ::= value
value ::= "[" (value ("," value)*)? "]" | "0")");
  ASSERT_NE(a.pushdown(), nullptr);
  EXPECT_TRUE(a.matches("[0,[0,[]],[]]"));
  std::string deep = "0";
  for (int d = 0; d < 300; ++d) deep = "[" + deep + "]";
  EXPECT_TRUE(a.matches(deep));
  // Configurations are interned and steps remembered: the same text again meets no new one.
  const size_t met = a.pushdown()->configurations();
  EXPECT_TRUE(a.matches(deep));
  EXPECT_EQ(a.pushdown()->configurations(), met);
  EXPECT_TRUE(a.matches("[" + deep + ",0]"));
  EXPECT_FALSE(a.matches("[" + deep));  // unclosed
  EXPECT_FALSE(a.matches(deep + "]"));  // closed once too often
  EXPECT_FALSE(a.matches("[0,]"));
  // A prefix that can still be closed is a live state, one that cannot is none.
  EXPECT_NE(a.walk(a.start(), "[[[0,["), Automaton::kDead);
  EXPECT_EQ(a.walk(a.start(), "[[0]]]"), Automaton::kDead);
}

TEST(Gbnf, ALongRuleBesideRecursionCompiles) {
  // 20,000 states in a chain: trimming is one pass over the edges, not a pass per link.
  const std::string word(20000, 'a');
  const Automaton a = gbnf("root ::= \"(\" root \")\" | \"" + word + "\"");
  EXPECT_TRUE(a.matches("((" + word + "))"));
  EXPECT_FALSE(a.matches("((" + word + ")"));
}

TEST(Gbnf, RecursiveRulesShareOneSizeLimit) {
  // Ten rules of 45,000 states each: within the limit alone, past it together.
  std::string g = "root ::= r0";
  for (int r = 0; r < 10; ++r) g += " | r" + std::to_string(r);
  for (int r = 0; r < 10; ++r) g += "\nr" + std::to_string(r) + " ::= \"(\" r" + std::to_string(r) + " \")\" | \"" + std::string(45000, 'a') + "\"";
  try {
    gbnf(g);
    ADD_FAILURE() << "accepted";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
}

TEST(Gbnf, GrammarsWithoutRecursionStayByteDfas) {
  const Automaton a = gbnf("root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"(\" digits \")\"\ndigits ::= [0-9]+");
  ASSERT_NE(a.dfa(), nullptr);
  EXPECT_TRUE(a.matches("ab,(12),c"));
  EXPECT_FALSE(a.matches("ab,(x)"));
}

TEST(Gbnf, AmbiguousAndEmptyRulesAcrossCalls) {
  // `item` may be empty and `list` may end where another `item` could start: the automaton
  // holds every parse the bytes so far allow.
  const Automaton a = gbnf(R"g(root ::= list "." | "(" root ")"
list ::= item | item "," list
item ::= "" | "x" | "xy")g");
  for (const char* yes : {".", "x.", ",.", "x,xy,.", "((x,,xy.))", "xy,x."}) EXPECT_TRUE(a.matches(yes)) << yes;
  for (const char* no : {"", "x", "(x.", "x.)", "xx.", "y."}) EXPECT_FALSE(a.matches(no)) << no;
}

TEST(Gbnf, RefusesByNameAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"start ::= \"a\"", "no rule 'root'"},
      {"root ::= item\n", "'item' is used (line 1) but never defined"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= \"a", "unterminated"},
      {"root ::= (\"a\"", "without its ')'"},
      {"root ::= [a-", "without its ']'"},
      {"root \"a\"", "'::=' was expected"},
      {"root ::= \"a\"{3,1}", "n < m"},
      {"root ::= \"\\q\"", "escape \\q"},
      {"root ::= x\nx ::= x \"a\"", "matches nothing"},  // only infinite recursion
      {"root ::= e\ne ::= e \"+\" t | t\nt ::= [0-9]", "'e' is left-recursive"},
      {"root ::= a\na ::= b \"x\" | \"y\"\nb ::= \"\" | a", "left-recursive"},  // through an empty rule
  };
  for (const auto& [text, says] : cases) {
    SCOPED_TRACE(text);
    try {
      gbnf(text);
      ADD_FAILURE() << "accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace orzo::grammar

namespace orzo::grammar {
namespace {

// A JSON grammar written as people write them, lists as `x ("," x)*`: compiled within the
// automaton's limits, and matching JSON.
TEST(Gbnf, AJsonGrammarCompilesAndMatches) {
  const Automaton dfa = gbnf(R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws ::= | " " | "\n" [ \t]{0,20}
)");
  ASSERT_NE(dfa.pushdown(), nullptr);
  for (const char* yes : {"{}", R"({"a": [1, 2.5, {"b": null}], "c": "d\n"})", "{\"x\":\n  true}"})
    EXPECT_TRUE(dfa.matches(yes)) << yes;
  for (const char* no : {"[]", R"({"a":})", R"({"a":1,})"}) EXPECT_FALSE(dfa.matches(no)) << no;
}

}  // namespace
}  // namespace orzo::grammar
