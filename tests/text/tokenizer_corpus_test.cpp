// Every text of tests/fixtures/tokenizer/corpus.jsonl (tools/make_tokenizer_corpus.py)
// against the ids HF `tokenizers` gives for it (tools/make_tokenizer_expected.py), per
// family and per file format: the GGUF forms of a vocabulary must give the HF ids too.
// (expected/llama3-splits.txt and gguf-pre-splits.json hold piece end offsets of split rules
// instead.)
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/mapped_file.hpp"
#include "formats/gguf.hpp"
#include "text/tokenizer/gguf_pre_type.hpp"
#include "text/tokenizer/normalizer.hpp"
#include "text/tokenizer/pretokenizer.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace orzo {
namespace {

const std::string kModels = std::string(ORZO_SHARED_DIR) + "/models";
const std::string kFixtures = std::string(ORZO_FIXTURES_DIR) + "/tokenizer";

std::vector<std::string> corpus() {
  std::ifstream in(kFixtures + "/corpus.jsonl", std::ios::binary);
  std::vector<std::string> texts;
  for (std::string line; std::getline(in, line);) texts.push_back(nlohmann::json::parse(line).get<std::string>());
  return texts;
}

std::vector<std::vector<int32_t>> expected(const std::string& family) {
  std::ifstream in(kFixtures + "/expected/" + family + ".txt", std::ios::binary);
  std::vector<std::vector<int32_t>> all;
  for (std::string line; std::getline(in, line);) {
    std::vector<int32_t> ids;
    std::istringstream words(line);
    for (int32_t id; words >> id;) ids.push_back(id);
    all.push_back(std::move(ids));
  }
  return all;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void check_corpus(const Tokenizer& tok, const std::string& family, const std::string& label) {
  const auto texts = corpus();
  const auto want = expected(family);
  ASSERT_GE(texts.size(), 5000u);
  ASSERT_EQ(texts.size(), want.size()) << family;
  size_t ok = 0, reported = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = tok.encode(texts[i], false);
    if (ids == want[i]) {
      ++ok;
    } else if (reported++ < 5) {
      ADD_FAILURE() << label << " line " << i << " " << nlohmann::json(texts[i]).dump() << "\n  got  " << show(ids)
                    << "\n  want " << show(want[i]);
    }
  }
  std::cout << label << ": " << ok << "/" << texts.size() << " lines match\n";
  EXPECT_EQ(ok, texts.size()) << label;
}

// Byte-level BPE loses nothing, so decoding gives back every text exactly (after the
// tokenizer's normalizer, when it has one).
void check_round_trip(const Tokenizer& tok, const Normalizer& normalizer = {}) {
  std::string normalized;
  for (const auto& text : corpus()) {
    normalizer.apply(text, normalized);
    EXPECT_EQ(tok.decode(tok.encode(text, false), false), normalized);
  }
}

Tokenizer gguf_tokenizer(const std::string& path) { return Tokenizer::from_gguf(read_gguf(path).metadata); }

TEST(TokenizerCorpus, Qwen3) {
  const auto tok = Tokenizer::from_hf_json(kModels + "/tokenizers/qwen3/tokenizer.json");
  check_corpus(tok, "qwen3", "qwen3 tokenizer.json");
}

TEST(TokenizerCorpus, Phi3) {
  check_corpus(Tokenizer::from_hf_json(kModels + "/tokenizers/phi-3/tokenizer.json"), "phi-3", "phi-3 tokenizer.json");
  check_corpus(gguf_tokenizer(kModels + "/vocab/ggml-vocab-phi-3.gguf"), "phi-3", "phi-3 GGUF");
}

TEST(TokenizerCorpus, Gpt2) {
  const auto files = Tokenizer::from_gpt2_files(kModels + "/tokenizers/gpt2/vocab.json", kModels + "/tokenizers/gpt2/merges.txt");
  check_corpus(files, "gpt2", "gpt2 vocab.json+merges.txt");
  check_corpus(gguf_tokenizer(kModels + "/vocab/ggml-vocab-gpt-2.gguf"), "gpt2", "gpt2 GGUF");
  check_round_trip(files);
}

// A GGUF's metadata without its tensors: the head of the file with the tensor count set to
// zero, so a tensor type the reader does not load (SmolLM2's Q4_1) cannot stand in the way
// of a tokenizer, which is metadata alone.
GgufMetadata gguf_metadata_only(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(16u << 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.size() < 24) throw std::runtime_error(path + ": too short for a GGUF header");
  std::fill(head.begin() + 8, head.begin() + 16, '\0');  // after the magic and the version
  return read_gguf(MappedFile::from_bytes(path, head.data(), head.size())).metadata;
}

// SmolLM2's GGUF (tokenizer.ggml.pre = smollm) against HF's BPE over the same tokens and
// merges with SmolLM2's Digits + ByteLevel pre-tokenizer.
TEST(TokenizerCorpus, SmolLM2Gguf) {
  const auto tok = Tokenizer::from_gguf(gguf_metadata_only(kModels + "/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"));
  check_corpus(tok, "smollm2", "smollm2 GGUF");
  check_round_trip(tok);
}

TEST(TokenizerCorpus, Stories260K) {
  check_corpus(Tokenizer::from_hf_dir(kModels + "/stories260K/hf"), "stories260K", "stories260K hf/tokenizer.json");
  check_corpus(gguf_tokenizer(kModels + "/stories260K/stories260K.gguf"), "stories260K", "stories260K GGUF");
}

TEST(TokenizerCorpus, MistralV1) {
  check_corpus(Tokenizer::from_sentencepiece_model(kModels + "/tokenizers/mistral-v1/tokenizer.model"), "mistral-v1",
               "mistral-v1 tokenizer.model");
}

// One tokenizer shared by threads (its BPE cache is shared) gives each the same ids.
TEST(TokenizerCorpus, ConcurrentEncodeGivesTheSameIds) {
  const auto tok = Tokenizer::from_hf_json(kModels + "/tokenizers/phi-3/tokenizer.json");
  const auto texts = corpus();
  const auto want = expected("phi-3");
  std::vector<size_t> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < mismatches.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t i = t; i < texts.size() + t; ++i) {
        const size_t k = (i * 7) % texts.size();  // different orders, so threads collide on slots
        mismatches[t] += tok.encode(texts[k], false) != want[k];
      }
    });
  for (auto& th : threads) th.join();
  for (size_t m : mismatches) EXPECT_EQ(m, 0u);
}

// No Llama 3 vocabulary is here, so its split regex is compared alone: the byte offsets
// where HF's Split pre-tokenizer ends each piece.
TEST(TokenizerCorpus, Llama3SplitRegex) {
  PreTokenizer pre;
  pre.add_split(std::make_shared<const SplitRegex>(kLlama3SplitRegex), PreTokenizer::SplitBehavior::Isolated);
  const auto texts = corpus();
  const auto want = expected("llama3-splits");
  ASSERT_EQ(texts.size(), want.size());
  PreTokenizer::Scratch scratch;
  size_t ok = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    pre.run(texts[i], true, scratch);
    std::vector<int32_t> ends;
    for (std::string_view piece : scratch.pieces)
      ends.push_back(static_cast<int32_t>(piece.data() + piece.size() - texts[i].data()));
    ok += ends == want[i];
    EXPECT_EQ(show(ends), show(want[i])) << "line " << i << " " << nlohmann::json(texts[i]).dump();
  }
  std::cout << "llama3 split regex: " << ok << "/" << texts.size() << " lines match\n";
}

// Every tokenizer.ggml.pre name orzo reads, against HF running llama.cpp's regexes for it
// as Splits (expected/gguf-pre-splits.json): where the pieces end, after the normalizer.
TEST(TokenizerCorpus, GgufPreTypeSplits) {
  std::ifstream in(kFixtures + "/expected/gguf-pre-splits.json", std::ios::binary);
  const auto j = nlohmann::json::parse(in);
  const auto texts = j["texts"].get<std::vector<std::string>>();
  ASSERT_GE(texts.size(), 400u);
  const auto names = gguf_pre_type_names();
  ASSERT_EQ(names.size(), j["splits"].size());
  PreTokenizer::Scratch scratch;
  std::string normalized;
  for (const std::string& name : names) {
    const auto rules = gguf_pre_type(name);
    ASSERT_TRUE(rules) << name;
    ASSERT_TRUE(j["splits"].contains(name)) << name;
    const auto& want = j["splits"][name];
    ASSERT_EQ(want.size(), texts.size()) << name;
    size_t ok = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      rules->normalizer.apply(texts[i], normalized);
      rules->pre_tokenizer.run(normalized, true, scratch);
      std::vector<int32_t> ends;
      for (std::string_view piece : scratch.pieces)
        ends.push_back(static_cast<int32_t>(piece.data() + piece.size() - normalized.data()));
      ok += ends == want[i].get<std::vector<int32_t>>();
      EXPECT_EQ(show(ends), show(want[i].get<std::vector<int32_t>>())) << name << " text " << i << " "
                                                                       << nlohmann::json(texts[i]).dump();
    }
    std::cout << "tokenizer.ggml.pre " << name << ": " << ok << "/" << texts.size() << " texts match\n";
  }
  EXPECT_FALSE(gguf_pre_type("falcon"));
}

TEST(TokenizerCorpus, Qwen3RoundTripToNfc) {
  Normalizer nfc;
  nfc.add_unicode_form(Normalizer::Form::NFC);
  check_round_trip(Tokenizer::from_hf_json(kModels + "/tokenizers/qwen3/tokenizer.json"), nfc);
}

}  // namespace
}  // namespace orzo
