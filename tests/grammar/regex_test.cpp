// Regular expressions to byte automata: what Python's re.fullmatch accepts for the same
// pattern (cases checked against Python by hand), UTF-8 throughout, and a clear refusal of
// what an automaton cannot express.

#include "grammar/byte_dfa.hpp"
#include "grammar/char_set.hpp"
#include "grammar/grammar_error.hpp"
#include "grammar/regex_parser.hpp"
#include "tests/support/text_reference.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace orzo::grammar {
namespace {

TEST(CharSet, UnionComplementAndMinusKeepRangesCanonical) {
  CharSet s = CharSet::range('a', 'f');
  s.add('g', 'k');
  s.add('0', '9');
  ASSERT_EQ(s.ranges().size(), 2u);
  EXPECT_EQ(s.ranges()[1], std::make_pair(uint32_t{'a'}, uint32_t{'k'}));
  const CharSet rest = s.complement();
  EXPECT_FALSE(rest.contains('c'));
  EXPECT_TRUE(rest.contains('l'));
  EXPECT_FALSE(rest.contains(0xD800));  // surrogates are never characters
  EXPECT_TRUE(rest.contains(kMaxCodePoint));
  EXPECT_EQ(s.minus(CharSet::range('c', 'h')).ranges().size(), 3u);
  EXPECT_TRUE(CharSet::range('a', 'z').minus(CharSet::range('a', 'z')).empty());
}

// Every code point is encoded by some sequence exactly when it is in the set.
TEST(CharSet, Utf8SequencesEncodeExactlyTheSet) {
  std::mt19937 engine(3);
  const auto rng = [&engine] { return static_cast<uint32_t>(engine()); };
  for (int round = 0; round < 40; ++round) {
    CharSet set;
    for (int k = 0; k < 4; ++k) {
      const uint32_t lo = rng() % 0x110000, span = rng() % (k % 2 ? 100 : 70000);
      set.add(lo, std::min<uint32_t>(lo + span, kMaxCodePoint));
    }
    const auto seqs = utf8_sequences(set);
    const auto encoded = [&](uint32_t c) {
      const std::string e = testing::encode_utf8(c);
      for (const auto& seq : seqs) {
        if (seq.size() != e.size()) continue;
        bool all = true;
        for (size_t i = 0; i < e.size(); ++i)
          all &= seq[i].first <= static_cast<uint8_t>(e[i]) && static_cast<uint8_t>(e[i]) <= seq[i].second;
        if (all) return true;
      }
      return false;
    };
    for (int probe = 0; probe < 3000; ++probe) {
      uint32_t c = rng() % 0x110000;
      if (probe % 3 == 0 && !set.ranges().empty()) {
        const auto& r = set.ranges()[rng() % set.ranges().size()];
        c = r.first + rng() % (r.second - r.first + 1);
        c = probe % 2 ? r.first : (probe % 5 ? r.second : c);
      }
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      ASSERT_EQ(encoded(c), set.contains(c)) << std::hex << c;
    }
  }
}

struct Case {
  std::string pattern;
  std::vector<std::string> yes, no;
};

TEST(Regex, MatchesAsPythonsFullmatch) {
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"", "ab", "abcd", "ABC"}},
      {"a|b|", {"a", "b", ""}, {"ab"}},
      {"(ab)*c", {"c", "abc", "ababc"}, {"ac", "abab"}},
      {"a+?b{2,3}", {"abb", "aaabbb"}, {"ab", "abbbb", "b"}},
      {"x{3}", {"xxx"}, {"xx", "xxxx"}},
      {"x{,2}y{2,}", {"yy", "xxyyyy"}, {"xxxyy", "xy"}},
      {"a{2", {"a{2"}, {"aa"}},  // not a count: literal, as in Python
      {"[a-c0-2_]+", {"a1_", "c"}, {"d", ""}},
      {"[^a-z]", {"A", "é", "\n"}, {"q"}},
      {"\\d\\d-\\w+\\s\\S", {"12-ab_9 x"}, {"1a-x y", "12-ab_9 "}},
      {"\\D\\W", {"a-"}, {"1-", "a_"}},
      {".", {"x", "é", "😀"}, {"\n", ""}},
      {"[\\]\\-\\\\]+", {"]-\\"}, {"a"}},
      {"\\x41\\u00e9\\U0001F600", {"Aé😀"}, {"A"}},
      {"(?:ab|cd)(?P<n>e)(?<m>f)", {"abef", "cdef"}, {"abf"}},
      {"^a.c$", {"abc"}, {"ac"}},
      {"colou?r", {"color", "colour"}, {"colouur"}},
      {"[\\u4e00-\\u9fff]{2}", {"中文"}, {"中", "ab"}},
      {"[.*+?]", {".", "*", "+", "?"}, {"a"}},
      {"(a|b)*abb", {"abb", "aababb"}, {"ab", "abba"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.pattern);
    const ByteDfa dfa = ByteDfa::compile(parse_regex(c.pattern));
    for (const auto& s : c.yes) EXPECT_TRUE(dfa.matches(s)) << "'" << s << "'";
    for (const auto& s : c.no) EXPECT_FALSE(dfa.matches(s)) << "'" << s << "'";
  }
}

// Tokens may end inside a character: the automaton walks bytes.
TEST(Regex, WalksMultibyteCharactersByteByByte) {
  const ByteDfa dfa = ByteDfa::compile(parse_regex("é+"));
  int32_t s = dfa.start();
  s = dfa.step(s, 0xC3);
  ASSERT_NE(s, ByteDfa::kDead);
  EXPECT_FALSE(dfa.accepting(s));
  s = dfa.step(s, 0xA9);
  ASSERT_NE(s, ByteDfa::kDead);
  EXPECT_TRUE(dfa.accepting(s));
  EXPECT_EQ(dfa.step(dfa.start(), 0xA9), ByteDfa::kDead);
}

// Trimmed: no live state is a dead end, so a masked draw can always finish.
TEST(Regex, EveryLiveStateCanStillEnd) {
  const ByteDfa dfa = ByteDfa::compile(parse_regex("(ab|ac)d|x[0-9]{2}"));
  for (int32_t s = 0; s < static_cast<int32_t>(dfa.states()); ++s) EXPECT_TRUE(dfa.accepting(s) || dfa.continues(s)) << s;
  EXPECT_EQ(dfa.step(dfa.start(), 'a'), dfa.step(dfa.start(), 'a'));
}

TEST(Regex, RefusesWhatAnAutomatonCannotExpress) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(a)\\1", "backreference"},   {"a(?=b)", "lookaround"},  {"a(?<!b)", "lookaround"},
      {"\\bword", "\\b"},            {"(?i)a", "inline flags"}, {"a$b", "anchor"},
      {"(ab", "without its ')'"},    {"ab)", "unbalanced"},     {"[ab", "without its ']'"},
      {"*a", "nothing to repeat"},   {"a{3,1}", "m < n"},       {"[z-a]", "out of order"},
      {"a{100000}", "above"},        {"a++", "possessive"},     {"\\", "trailing backslash"},
      {"\\q", "the escape \\q"},     {"[[:alpha:]]", "POSIX"},
  };
  for (const auto& [pattern, says] : cases) {
    SCOPED_TRACE(pattern);
    try {
      ByteDfa::compile(parse_regex(pattern));
      ADD_FAILURE() << "accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ByteDfa::compile(parse_regex("[^\\x00-\\U0010FFFF]")), GrammarError);  // matches nothing
  EXPECT_THROW(ByteDfa::compile(parse_regex("(a{1000}){1000}")), GrammarError);      // too large
}

// Few states of many NFA states each: bounded by the work of the construction, not only by
// the states it makes (which took 19 s to reach here), and said so.
TEST(Regex, RefusesAnAutomatonTooCostlyToBuild) {
  for (const char* pattern : {"(.?){1000}a{1000}", "([^a]?){999}(a?){999}"}) {
    SCOPED_TRACE(pattern);
    try {
      ByteDfa::compile(parse_regex(pattern));
      ADD_FAILURE() << "accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find("too complex (its automaton takes more than"), std::string::npos) << e.what();
    }
  }
  // Well within it: 12,001 states of up to 200 NFA states each.
  EXPECT_EQ(ByteDfa::compile(parse_regex("(.?){100}a{100}")).states(), 12001u);
}

}  // namespace
}  // namespace orzo::grammar
