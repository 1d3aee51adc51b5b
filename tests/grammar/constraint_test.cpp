// Token masks: the tokens a constraint allows in a state are exactly those whose bytes keep
// its automaton alive (checked against a brute-force walk), EOS exactly where it may end;
// compiled constraints are cached by their text.

#include "grammar/constraint.hpp"
#include "grammar/grammar_error.hpp"
#include "grammar/tool_calls.hpp"

#include <gtest/gtest.h>

#include <random>

namespace orzo::grammar {
namespace {

std::shared_ptr<const Vocabulary> vocabulary() {
  // Every byte alone, then pieces of JSON and words, a multi-byte character split over two
  // tokens, a duplicate spelling, a special token and EOS.
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  for (const char* piece : {"{\"", "\":", "\"}", "true", "false", "null", "12", "345", ", ", "\"name", "é", "\xC3",
                            "\xA9x", "ab", "ab", "abc", "<|special|>", "</s>"})
    bytes.emplace_back(piece);
  std::vector<uint8_t> special(bytes.size(), 0);
  special[bytes.size() - 2] = special[bytes.size() - 1] = 1;
  return std::make_shared<Vocabulary>(bytes, special, std::vector<int32_t>{static_cast<int32_t>(bytes.size() - 1)},
                                      static_cast<int32_t>(bytes.size()) + 5);
}

OutputConstraint regex(const std::string& pattern) { return {OutputConstraint::Kind::regex, pattern, false}; }

TEST(Constraint, MasksAreExactlyTheTokensThatKeepItAlive) {
  const auto vocab = vocabulary();
  ConstraintCache cache(vocab);
  // Regular ones (byte DFAs) and ones whose rules recur (pushdown automata: json_object, the
  // grammar), which draw 40 tokens to go a few levels deep.
  for (const auto& c : {regex("(ab|é)+c?"), regex("[0-9]{1,5}"), OutputConstraint{OutputConstraint::Kind::json_object, "", false},
                        OutputConstraint{OutputConstraint::Kind::choice, R"(["true","false","ab c"])", false},
                        OutputConstraint{OutputConstraint::Kind::grammar, "root ::= \"(\" root* \")\" | \"ab\" | [0-9]", false}}) {
    SCOPED_TRACE(c.text);
    const auto compiled = cache.get(c);
    std::mt19937 rng(1);
    int32_t state = compiled->start();
    for (int step = 0; step < 40; ++step) {
      const auto mask = compiled->mask(state);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->size(); ++id) {
        bool ok = false;
        if (compiled->is_eos(id)) {
          ok = compiled->automaton().accepting(state);
        } else if (vocab->constrainable(id)) {
          ok = compiled->automaton().walk(state, vocab->bytes(id)) != Automaton::kDead;
        }
        EXPECT_EQ(mask->allows(id), ok) << "token " << id << " at step " << step;
        if (ok) allowed.push_back(id);
      }
      EXPECT_EQ(mask->allowed, static_cast<int32_t>(allowed.size()));
      ASSERT_FALSE(allowed.empty());
      const int32_t token = allowed[rng() % allowed.size()];
      if (compiled->is_eos(token)) break;
      state = compiled->advance(state, token);
      ASSERT_NE(state, Automaton::kDead);
    }
  }
}

TEST(Constraint, SpecialAndOutOfTokenizerIdsAreNeverAllowedAndBreakTheMatch) {
  const auto vocab = vocabulary();
  const auto compiled = ConstraintCache(vocab).get(regex(".*"));
  const auto mask = compiled->mask(compiled->start());
  const auto special = vocab->size() - 5 - 2;
  EXPECT_FALSE(mask->allows(special));
  EXPECT_FALSE(mask->allows(vocab->size() - 1));
  EXPECT_TRUE(mask->allows(vocab->size() - 5 - 1));  // EOS: .* may end anywhere
  ConstraintMatcher m(compiled);
  EXPECT_FALSE(m.advance(special));
  EXPECT_EQ(m.mask()->allowed, 0);
}

TEST(Constraint, TheCacheCompilesEachTextOnceAndEvictsTheOldest) {
  ConstraintCache cache(vocabulary(), 2);
  const auto a = cache.get(regex("a+"));
  EXPECT_EQ(cache.get(regex("a+")), a);
  cache.get(regex("b+"));
  cache.get(regex("a+"));  // a is now the most recent
  cache.get(regex("c+"));  // evicts b
  EXPECT_EQ(cache.get(regex("a+")), a);
  EXPECT_THROW(cache.get(regex("(")), GrammarError);
  EXPECT_THROW(cache.get(OutputConstraint{OutputConstraint::Kind::choice, "[]", false}), GrammarError);
  EXPECT_THROW(cache.get(OutputConstraint{OutputConstraint::Kind::choice, "[1]", false}), GrammarError);
}

TEST(Constraint, TheCacheRetiresACompiledConstraintHoldingTooManyMasks) {
  ConstraintCache cache(vocabulary(), 4, 2);
  const OutputConstraint any{OutputConstraint::Kind::json_object, "", false};
  const auto worn = cache.get(any);
  ConstraintMatcher m(worn);
  for (const char c : std::string("{\"a\":[[")) {  // tokens 0-255 are the bytes alone
    m.mask();
    ASSERT_TRUE(m.advance(static_cast<uint8_t>(c)));
  }
  EXPECT_GT(worn->masks(), 2u);
  const auto fresh = cache.get(any);
  EXPECT_NE(fresh, worn);
  EXPECT_EQ(cache.get(any), fresh);
  EXPECT_TRUE(m.advance('1'));  // the worn one still serves its users
}

}  // namespace
}  // namespace orzo::grammar

namespace orzo::grammar {
namespace {

// Enforced tool calls: only calls to the functions offered, in the format, with arguments
// that fit their schemas; one call unless parallel.
TEST(ToolCallConstraint, OnlyWellFormedCallsToOfferedFunctions) {
  const std::string functions =
      R"([{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},{"name":"now"}])";
  const auto dfa = [&](const char* format, bool parallel) {
    return compile_automaton({OutputConstraint::Kind::tool_calls,
                              std::string(R"({"format":")") + format + R"(","parallel":)" + (parallel ? "true" : "false") +
                                  R"(,"functions":)" + functions + "}",
                              false});
  };
  const Automaton hermes = dfa("hermes", true);
  EXPECT_TRUE(hermes.matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_TRUE(hermes.matches("<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>\n<tool_call>\n{\"name\":\"now\",\"arguments\":{\"x\":1}}\n</tool_call>"));
  EXPECT_FALSE(hermes.matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));  // city required
  EXPECT_FALSE(hermes.matches("<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(hermes.matches("Sure!"));
  const Automaton single = dfa("hermes", false);
  EXPECT_FALSE(single.matches("<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>\n<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>"));
  EXPECT_TRUE(dfa("llama3_json", true).matches("{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": {\"city\": \"x\"}}"));
  EXPECT_TRUE(dfa("mistral", true).matches("[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"now\", \"arguments\": {}}]"));
  for (const char* bad : {R"({"functions":[]})", "1", R"({"format":1,"functions":[{"name":"now"}]})",
                          R"({"parallel":"yes","functions":[{"name":"now"}]})"})
    EXPECT_THROW(compile_automaton({OutputConstraint::Kind::tool_calls, bad, false}), GrammarError) << bad;
  EXPECT_EQ(tool_call_format_of_template("... <tool_call> ..."), ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format_of_template("... [TOOL_CALLS] ..."), ToolCallFormat::mistral);
  EXPECT_EQ(tool_call_format_of_template("... <|python_tag|> ..."), ToolCallFormat::llama3_json);
}

}  // namespace
}  // namespace orzo::grammar
