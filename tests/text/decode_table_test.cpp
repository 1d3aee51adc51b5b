// decode(): special tokens, the leading-space strip, ids outside the table, and UTF-8
// repair, against Python's bytes.decode('utf-8', 'replace') on hand-picked ill-formed
// sequences and against the slow reference on random bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/support/text_reference.hpp"
#include "text/decode_table.hpp"
#include "text/utf8.hpp"

namespace orzo {
namespace {

using testing::kFffd;

std::string decode_ids(const DecodeTable& t, const std::vector<int32_t>& ids, bool skip_special = true) {
  return decode(t, ids.data(), ids.size(), skip_special);
}

// <s>, " Hello", " world", "!", "", "</s>"
DecodeTable greeting_table(bool strip) {
  DecodeTable t;
  t.bytes = {"<s>", " Hello", " world", "!", "", "</s>"};
  t.special = {1, 0, 0, 0, 0, 1};
  t.strip_leading_space = strip;
  return t;
}

TEST(DecodeTable, SkipsOrKeepsSpecialTokens) {
  const DecodeTable t = greeting_table(false);
  EXPECT_EQ(decode_ids(t, {0, 1, 2, 3, 5}), " Hello world!");
  EXPECT_EQ(decode_ids(t, {0, 1, 2, 3, 5}, false), "<s> Hello world!</s>");
}

TEST(DecodeTable, StripsOneLeadingSpaceOfTheWholeText) {
  const DecodeTable t = greeting_table(true);
  EXPECT_EQ(decode_ids(t, {1, 2}), "Hello world");
  // The first token is special and skipped: the text still starts with " Hello".
  EXPECT_EQ(decode_ids(t, {0, 1, 2}), "Hello world");
  // An empty first token leaves the strip to the first byte that comes.
  EXPECT_EQ(decode_ids(t, {4, 1}), "Hello");
  // Kept, the special token is the start of the text and nothing is stripped.
  EXPECT_EQ(decode_ids(t, {0, 1}, false), "<s> Hello");
  // Only one space, and only at the very start.
  DecodeTable spaces = t;
  spaces.bytes[3] = "  x";
  EXPECT_EQ(decode_ids(spaces, {3, 3}), " x  x");
  EXPECT_EQ(decode_ids(greeting_table(false), {1}), " Hello");
}

TEST(DecodeTable, SkipsIdsOutsideTheTable) {
  const DecodeTable t = greeting_table(false);
  EXPECT_EQ(decode_ids(t, {-1, 1, 6, 1 << 30, 3}), " Hello!");
  EXPECT_EQ(decode_ids(t, {}), "");
}

// Expected outputs from Python 3: bytes.decode('utf-8', 'replace').encode('utf-8').
TEST(DecodeTable, ReplacesIllFormedSequencesAsPythonDoes) {
  DecodeTable t;
  for (int b = 0; b < 256; ++b) t.bytes.emplace_back(1, static_cast<char>(b));
  t.special.assign(256, 0);
  const std::string f = kFffd;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\x80", f},                                 // lone continuation byte
      {"\xBF\x80", f + f},                         // two of them
      {"a\xE2\x82", "a" + f},                      // truncated at the end
      {"\xE2\x82\x41", f + "A"},                   // truncated before an ASCII letter
      {"\xC0\x80", f + f},                         // overlong NUL
      {"\xC1\xBF", f + f},                         // overlong
      {"\xE0\x80\x80", f + f + f},                 // overlong, 3 bytes
      {"\xE0\x9F\xBF", f + f + f},                 // overlong, 3 bytes
      {"\xED\xA0\x80", f + f + f},                 // surrogate D800
      {"\xED\xBF\xBF", f + f + f},                 // surrogate DFFF
      {"\xED\x9F\xBF", "\xED\x9F\xBF"},            // U+D7FF is fine
      {"\xF0\x80\x80\x80", f + f + f + f},         // overlong, 4 bytes
      {"\xF4\x90\x80\x80", f + f + f + f},         // U+110000
      {"\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"},    // U+10FFFF is fine
      {"\xF5\x80", f + f},                         // F5 never starts a character
      {"\xFF", f},                                 // nor does FF
      {"\xF0\x9F\x98\x41", f + "A"},               // an emoji missing its last byte
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},    // the whole emoji
      {"\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41", f + f + f + f + "A"},  // four maximal subparts in a row
  };
  for (const auto& [in, expected] : cases) {
    std::vector<int32_t> ids;
    for (const char c : in) ids.push_back(static_cast<uint8_t>(c));
    EXPECT_EQ(decode_ids(t, ids), expected) << ::testing::PrintToString(in);
  }
}

// Random byte strings, biased towards the bytes where the rules change, cut into random
// tokens, against the reference.
TEST(DecodeTable, RepairsRandomBytesLikeTheReference) {
  std::mt19937 rng(7);
  static constexpr uint8_t kEdges[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                                       0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes;
    const size_t n = std::uniform_int_distribution<size_t>(0, 24)(rng);
    while (bytes.size() < n) {
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0: bytes += static_cast<char>(kEdges[std::uniform_int_distribution<size_t>(0, std::size(kEdges) - 1)(rng)]); break;
        case 1: bytes += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng)); break;
        case 2: bytes += testing::encode_utf8(testing::random_scalar(rng)); break;
      }
    }
    // Tokens of 1..5 bytes each.
    DecodeTable t;
    std::vector<int32_t> ids;
    for (size_t i = 0; i < bytes.size();) {
      const size_t len = std::min(bytes.size() - i, std::uniform_int_distribution<size_t>(1, 5)(rng));
      ids.push_back(static_cast<int32_t>(t.bytes.size()));
      t.bytes.push_back(bytes.substr(i, len));
      i += len;
    }
    t.special.assign(t.bytes.size(), 0);
    const std::string expected = testing::reference_repair(bytes).text;
    ASSERT_EQ(decode_ids(t, ids), expected) << ::testing::PrintToString(bytes);
    ASSERT_EQ(valid_utf8(bytes), expected == bytes) << ::testing::PrintToString(bytes);
  }
}

TEST(DecodeTable, DecodesRandomTablesLikeTheReference) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 1000; ++iter) {
    const DecodeTable t = testing::random_table(rng, 64);
    const std::vector<int32_t> ids = testing::random_ids(rng, t, 40);
    for (const bool skip : {true, false})
      ASSERT_EQ(decode_ids(t, ids, skip), testing::reference_repair(testing::reference_bytes(t, ids, skip)).text);
  }
}

}  // namespace
}  // namespace orzo
