// The streaming detokenizer: its deltas add up to decode(), each is whole characters, and
// it holds back exactly the bytes that may still become a character, no more, no less.
#include "text/detokenizer.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/text_reference.hpp"
#include "text/decode_table.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace orzo {
namespace {

using testing::kFffd;

DecodeTable byte_table() {
  DecodeTable t;
  for (int b = 0; b < 256; ++b) t.bytes.emplace_back(1, static_cast<char>(b));
  t.bytes.push_back("<s>");
  t.bytes.push_back(" Hi");
  t.special.assign(t.bytes.size(), 0);
  t.special[256] = 1;
  t.strip_leading_space = true;
  return t;
}

constexpr int32_t kBos = 256, kHi = 257;

TEST(Detokenizer, ByteFallbackTokensMakeOneCharacter) {
  const DecodeTable t = byte_table();
  Detokenizer d(t);
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.push(0x9F), "");
  EXPECT_EQ(d.push(0x98), "");
  EXPECT_EQ(d.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.push('a'), "a");
  EXPECT_EQ(d.finish(), "");
}

TEST(Detokenizer, ReplacesAsSoonAsACharacterCannotBeCompleted) {
  const DecodeTable t = byte_table();
  Detokenizer d(t);
  EXPECT_EQ(d.push(0x80), kFffd);       // never a first byte
  EXPECT_EQ(d.push(0xE2), "");          // may become a character
  EXPECT_EQ(d.push('x'), kFffd + "x");  // did not
  EXPECT_EQ(d.push(0xED), "");
  EXPECT_EQ(d.push(0xA0), kFffd + kFffd);  // a surrogate: ruled out at its second byte
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.push(0x9F), "");
  EXPECT_EQ(d.finish(), kFffd);  // cut off by the end
  EXPECT_THROW(d.push('a'), std::logic_error);
}

TEST(Detokenizer, StripsTheLeadingSpaceAfterSkippedSpecials) {
  const DecodeTable t = byte_table();
  Detokenizer skip(t);
  EXPECT_EQ(skip.push(kBos), "");
  EXPECT_EQ(skip.push(kHi), "Hi");
  EXPECT_EQ(skip.push(kHi), " Hi");
  Detokenizer keep(t, false);
  EXPECT_EQ(keep.push(kBos), "<s>");
  EXPECT_EQ(keep.push(kHi), " Hi");
  Detokenizer space_byte(t);  // a byte-fallback space is the text's first byte too
  EXPECT_EQ(space_byte.push(' '), "");
  EXPECT_EQ(space_byte.push(' '), " ");
}

TEST(Detokenizer, SkipsIdsOutsideTheTable) {
  const DecodeTable t = byte_table();
  Detokenizer d(t);
  EXPECT_EQ(d.push(-5), "");
  EXPECT_EQ(d.push(100000), "");
  EXPECT_EQ(d.push(kHi), "Hi");
}

// Over random vocabularies and id streams: after every push, the text so far is the
// reference decode of the bytes so far minus only a still-completable tail; every delta is
// well-formed; with finish() the deltas add up to decode() and to the reference.
TEST(Detokenizer, StreamsExactlyTheDecodedText) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 2000; ++iter) {
    const DecodeTable t = testing::random_table(rng, 48);
    const std::vector<int32_t> ids = testing::random_ids(rng, t, 30);
    for (const bool skip : {true, false}) {
      Detokenizer d(t, skip);
      std::string text;
      std::vector<int32_t> prefix;
      for (const int32_t id : ids) {
        const std::string_view delta = d.push(id);
        ASSERT_TRUE(testing::reference_valid(delta)) << ::testing::PrintToString(std::string(delta));
        text += delta;
        prefix.push_back(id);
        const std::string bytes = testing::reference_bytes(t, prefix, skip);
        const size_t tail = testing::reference_repair(bytes).open_tail;
        ASSERT_LE(tail, 3u);
        ASSERT_EQ(text, testing::reference_repair(std::string_view(bytes).substr(0, bytes.size() - tail)).text);
      }
      const std::string_view last = d.finish();
      ASSERT_TRUE(testing::reference_valid(last));
      text += last;
      ASSERT_EQ(text, testing::reference_repair(testing::reference_bytes(t, ids, skip)).text);
      ASSERT_EQ(text, decode(t, ids.data(), ids.size(), skip));
    }
  }
}

// A completion continues its prompt, so the leading space its first word decodes to stays.
TEST(Detokenizer, AContinuationKeepsTheSpaceItsPromptLeavesToIt) {
  const DecodeTable t = byte_table();
  Detokenizer after_text(t);
  after_text.continue_after({kBos, kHi});
  EXPECT_EQ(after_text.push(kHi), " Hi");
  Detokenizer after_bos(t);  // nothing decoded yet: the text still begins here
  after_bos.continue_after({kBos});
  EXPECT_EQ(after_bos.push(kHi), "Hi");
  Detokenizer long_prompt(t);  // text far back, specials at the end
  long_prompt.continue_after({kHi, 'a', 'b', 'c', kBos, kBos, kBos, kBos});
  EXPECT_EQ(long_prompt.push(kHi), " Hi");
  Detokenizer unfinished(t);  // a character begun by the prompt is completed whole
  unfinished.continue_after({kHi, 'x', 0xF0, 0x9F});
  EXPECT_EQ(unfinished.push(0x98), "");
  EXPECT_EQ(unfinished.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(unfinished.finish(), "");
  Detokenizer started(t);
  started.push(kHi);
  EXPECT_THROW(started.continue_after({kBos}), std::logic_error);
}

TEST(Detokenizer, PromptTextPlusContinuationIsTheWholeDecode) {
  std::mt19937 rng(5);
  int exact = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    const DecodeTable t = testing::random_table(rng, 48);
    const std::vector<int32_t> ids = testing::random_ids(rng, t, 30);
    const size_t k = std::uniform_int_distribution<size_t>(0, ids.size())(rng);
    const std::vector<int32_t> prompt(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
    for (const bool skip : {true, false}) {
      // Only where no character spans the boundary can the two texts add up.
      if (testing::reference_repair(testing::reference_bytes(t, prompt, skip)).open_tail != 0) continue;
      Detokenizer d(t, skip);
      d.continue_after(prompt);
      std::string text = decode(t, prompt.data(), prompt.size(), skip);
      for (size_t i = k; i < ids.size(); ++i) text += d.push(ids[i]);
      text += d.finish();
      ASSERT_EQ(text, decode(t, ids.data(), ids.size(), skip)) << "iteration " << iter << ", split " << k;
      ++exact;
    }
  }
  EXPECT_GT(exact, 2000);
}

// The real decoders that strip a text's leading space (SentencePiece's, in GGUF, .model and
// tokenizer.json form): every split of an English text adds up to the whole.
TEST(Detokenizer, RealTokenizersKeepTheSpaceAtEverySplit) {
  const std::string models = std::string(ORZO_SHARED_DIR) + "/models";
  const std::vector<std::function<Tokenizer()>> loaders = {
      [&] { return Tokenizer::for_model(models + "/stories260K/stories260K.gguf"); },
      [&] { return Tokenizer::from_sentencepiece_model(models + "/tokenizers/mistral-v1/tokenizer.model"); },
      [&] {
        return Tokenizer::from_hf_json(models + "/tokenizers/phi-3/tokenizer.json",
                                       models + "/tokenizers/phi-3/tokenizer_config.json");
      },
  };
  for (const auto& load : loaders) {
    const Tokenizer tok = load();
    ASSERT_TRUE(tok.decode_table().strip_leading_space);
    for (const std::string text : {"The little dog was happy.", "Once upon a time, there was a girl named Lily",
                                   " two  spaces and\nlines 42"}) {
      const std::vector<int32_t> ids = tok.encode(text);
      for (size_t k = 1; k < ids.size(); ++k) {
        const std::vector<int32_t> prompt(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
        Detokenizer d(tok.decode_table());
        d.continue_after(prompt);
        std::string out = tok.decode(prompt, true);
        for (size_t i = k; i < ids.size(); ++i) out += d.push(ids[i]);
        out += d.finish();
        EXPECT_EQ(out, tok.decode(ids, true)) << text << ", split " << k;
      }
    }
  }
}

}  // namespace
}  // namespace orzo
