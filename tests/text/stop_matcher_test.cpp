// Stop strings over streamed text, against a reference that looks at the whole text at
// once: the output is the text cut before the stop match that ends first (the longest of
// those ending there), or after it with include_stop, or the whole text when none occurs.
#include "text/stop_matcher.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/text_reference.hpp"
#include "text/detokenizer.hpp"

namespace orzo {
namespace {

struct Expected {
  std::string text;
  int32_t matched = -1;
};

Expected reference_stop(const std::string& text, const std::vector<std::string>& stops, bool include_stop) {
  size_t best_end = std::string::npos, best_len = 0;
  Expected e{text, -1};
  for (size_t i = 0; i < stops.size(); ++i) {
    const size_t pos = text.find(stops[i]);  // a stop string's first match is its earliest end
    if (pos == std::string::npos) continue;
    const size_t end = pos + stops[i].size();
    if (end < best_end || (end == best_end && stops[i].size() > best_len)) {
      best_end = end, best_len = stops[i].size();
      e = {text.substr(0, include_stop ? end : pos), static_cast<int32_t>(i)};
    }
  }
  return e;
}

// Length of the longest suffix of `text` that is a proper prefix of a stop string: what
// may still become a match, so what must be held back.
size_t could_still_match(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const auto& stop : stops)
    for (size_t len = std::min(text.size(), stop.size() - 1); len > best; --len)
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) best = len;
  return best;
}

struct Streamed {
  std::string text;  // all that was emitted
  bool stopped = false;
};

// Pushes `deltas` one by one, checking after each what was released and what was held.
Streamed stream(const std::vector<std::string>& deltas, const std::vector<std::string>& stops, bool include_stop,
                const Expected& expected) {
  StopMatcher m(stops, include_stop);
  Streamed run;
  std::string pushed;
  size_t longest = 0;
  for (const auto& s : stops) longest = std::max(longest, s.size());
  for (const auto& delta : deltas) {
    const StopMatcher::Result r = m.push(delta);
    pushed += delta;
    EXPECT_TRUE(testing::reference_valid(r.text)) << ::testing::PrintToString(std::string(r.text));
    run.text += r.text;
    EXPECT_EQ(expected.text.compare(0, run.text.size(), run.text), 0)
        << "emitted " << ::testing::PrintToString(run.text) << ", not a prefix of the expected "
        << ::testing::PrintToString(expected.text);
    if (r.stopped) {
      run.stopped = true;
      EXPECT_EQ(m.matched(), expected.matched);
      EXPECT_THROW(m.push("x"), std::logic_error);
      EXPECT_EQ(m.finish(), "");
      return run;
    }
    const size_t held = pushed.size() - run.text.size();
    EXPECT_EQ(held, could_still_match(pushed, stops)) << ::testing::PrintToString(pushed);
    EXPECT_LT(held, std::max<size_t>(longest, 1));
    if (!include_stop) {
      for (const auto& s : stops) EXPECT_EQ(run.text.find(s), std::string::npos);
    }
  }
  EXPECT_EQ(m.matched(), -1);
  run.text += m.finish();
  return run;
}

Streamed simple(const std::vector<std::string>& deltas, const std::vector<std::string>& stops,
                bool include_stop = false) {
  std::string text;
  for (const auto& d : deltas) text += d;
  return stream(deltas, stops, include_stop, reference_stop(text, stops, include_stop));
}

TEST(StopMatcher, RefusesEmptyAndIllFormedStopStrings) {
  EXPECT_THROW(StopMatcher({"a", ""}), std::invalid_argument);
  EXPECT_THROW(StopMatcher({"\xE2\x82"}), std::invalid_argument);
  EXPECT_NO_THROW(StopMatcher({}));
}

TEST(StopMatcher, HoldsBackAPossibleStartUntilItCannotBeOne) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(m.push("Hello <").text, "Hello ");
  EXPECT_EQ(m.push("/").text, "");
  EXPECT_EQ(m.push("b>").text, "</b>");
  EXPECT_EQ(m.push(" <").text, " ");
  EXPECT_EQ(m.finish(), "<");
}

TEST(StopMatcher, MatchesAcrossDeltas) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abc ST").text, "abc ");
  const StopMatcher::Result r = m.push("OP more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(m.matched(), 0);
  EXPECT_THROW(m.push("x"), std::logic_error);

  StopMatcher with({"STOP"}, true);
  EXPECT_EQ(with.push("abc ST").text, "abc ");
  EXPECT_EQ(with.push("OP more").text, "STOP");
}

TEST(StopMatcher, StopsAtTheFirstCompletedMatch) {
  // "bc" is complete before "abcd" is, though "abcd" starts first.
  EXPECT_EQ(simple({"a", "b", "c", "d"}, {"abcd", "bc"}).text, "a");
  EXPECT_EQ(simple({"abcd"}, {"abcd", "bc"}).text, "a");
  // Same end: the longer one, so none of either is emitted.
  EXPECT_EQ(simple({"xb", "ab"}, {"ab", "bab"}).text, "x");
  EXPECT_EQ(simple({"xa", "b"}, {"ab", "bab"}).text, "x");
  EXPECT_EQ(simple({"b", "a", "b"}, {"ab", "bab"}).text, "");
  StopMatcher m({"ab", "bab"});
  m.push("bab");
  EXPECT_EQ(m.matched(), 1);
}

TEST(StopMatcher, KeepsMultiByteCharactersWhole) {
  EXPECT_EQ(simple({"caf", "é", "!"}, {"é!"}).text, "caf");
  StopMatcher m({"é!"});
  EXPECT_EQ(m.push("caf").text, "caf");
  EXPECT_EQ(m.push("é").text, "");
  EXPECT_EQ(m.push("è").text, "éè");
}

TEST(StopMatcher, WithoutStopStringsPassesTextOn) {
  StopMatcher m({});
  EXPECT_EQ(m.push("anything").text, "anything");
  EXPECT_EQ(m.finish(), "");
}

// Random texts over a small alphabet (so stop strings overlap and recur), cut into random
// deltas of whole characters, with stop strings taken from the text and made up.
TEST(StopMatcher, MatchesTheReferenceOnRandomStreams) {
  static const std::vector<std::string> kAlphabet = {"a", "b", "c", " ", "\n", "é", "\xF0\x9F\x98\x80"};
  std::mt19937 rng(5);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<std::string> chars;
    for (size_t n = pick(40); n > 0; --n) chars.push_back(kAlphabet[pick(pick(2) ? 3 : kAlphabet.size())]);
    std::vector<std::string> deltas;
    std::string text;
    for (size_t i = 0; i < chars.size();) {
      std::string delta;
      for (size_t k = 1 + pick(4); k > 0 && i < chars.size(); --k) delta += chars[i++];
      deltas.push_back(delta);
      text += delta;
    }
    std::vector<std::string> stops;
    for (size_t n = 1 + pick(4); n > 0; --n) {
      std::string stop;
      if (!chars.empty() && pick(2)) {
        const size_t from = pick(chars.size()), len = 1 + pick(std::min<size_t>(6, chars.size() - from));
        for (size_t i = from; i < from + len; ++i) stop += chars[i];
      } else {
        for (size_t k = 1 + pick(4); k > 0; --k) stop += kAlphabet[pick(kAlphabet.size())];
      }
      stops.push_back(stop);
    }
    for (const bool include : {false, true}) {
      const Expected expected = reference_stop(text, stops, include);
      const Streamed run = stream(deltas, stops, include, expected);
      ASSERT_EQ(run.text, expected.text) << ::testing::PrintToString(text) << " stops "
                                         << ::testing::PrintToString(stops);
      ASSERT_EQ(run.stopped, expected.matched >= 0);
    }
  }
}

// Byte offsets where a character of well-formed `text` starts, and its end.
std::vector<size_t> boundaries(const std::string& text) {
  std::vector<size_t> b;
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) b.push_back(i);
  b.push_back(text.size());
  return b;
}

// Detokenizer into StopMatcher, as a request streams: the same as cutting the decoded text.
TEST(StopMatcher, AfterTheDetokenizerMatchesCuttingTheDecodedText) {
  std::mt19937 rng(9);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (int iter = 0; iter < 1000; ++iter) {
    const DecodeTable t = testing::random_table(rng, 48);
    const std::vector<int32_t> ids = testing::random_ids(rng, t, 30);
    const std::string text = decode(t, ids.data(), ids.size(), true);
    const std::vector<size_t> b = boundaries(text);
    std::vector<std::string> stops;
    for (size_t n = 1 + pick(4); n > 0; --n) {
      if (b.size() > 1 && pick(4)) {
        const size_t from = pick(b.size() - 1), to = std::min(b.size() - 1, from + 1 + pick(4));
        stops.push_back(text.substr(b[from], b[to] - b[from]));
      } else {
        stops.push_back("zz\xC3\xA9");
      }
    }
    const bool include = pick(2);
    Detokenizer d(t);
    StopMatcher m(stops, include);
    std::string out;
    bool stopped = false;
    for (size_t i = 0; i < ids.size() && !stopped; ++i) {
      const StopMatcher::Result r = m.push(d.push(ids[i]));
      out += r.text;
      stopped = r.stopped;
    }
    if (!stopped) {
      const StopMatcher::Result r = m.push(d.finish());
      out += r.text;
      if (!r.stopped) out += m.finish();
    }
    ASSERT_EQ(out, reference_stop(text, stops, include).text);
  }
}

}  // namespace
}  // namespace orzo
