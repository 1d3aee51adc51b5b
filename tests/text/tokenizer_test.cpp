// The tokenizer's options one at a time (tests/fixtures/tokenizer/features.json: small
// tokenizers and the ids HF `tokenizers` gives them), refusal of what is not supported,
// and the metadata a chat front end reads.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/load_error.hpp"
#include "formats/gguf_writer.hpp"
#include "tests/support/temp_dir.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace orzo {
namespace {

using nlohmann::json;

const std::string kModels = std::string(ORZO_SHARED_DIR) + "/models";
const std::string kFixtures = std::string(ORZO_FIXTURES_DIR) + "/tokenizer";

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return json::parse(in);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

class TokenizerFeatures : public testing::TempDirTest {};

TEST_F(TokenizerFeatures, MatchHfOnEveryOption) {
  const json features = read_json(kFixtures + "/features.json");
  ASSERT_GE(features.size(), 15u);
  for (const json& f : features) {
    const std::string name = f["name"].get<std::string>();
    write_text(path(name + ".json"), f["tokenizer"].dump());
    const Tokenizer tok = Tokenizer::from_hf_json(path(name + ".json"));
    for (const json& c : f["cases"]) {
      const std::string text = c["text"].get<std::string>();
      const auto ids = tok.encode(text, c["add_special_tokens"].get<bool>());
      EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << name << ": " << json(text).dump();
      EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>()) << name << ": " << json(text).dump();
      EXPECT_EQ(tok.decode(ids, true), c["decoded_skip_special"].get<std::string>()) << name << ": " << json(text).dump();
    }
  }
}

// features.json's byte-level tokenizer with one part replaced must be refused, naming the
// part and the file.
class TokenizerRefusal : public testing::TempDirTest {
 protected:
  void expect_refused(const std::string& pointer, const json& value, const std::string& message) {
    json tj;
    for (const json& f : read_json(kFixtures + "/features.json"))
      if (f["name"] == "byte_level") tj = f["tokenizer"];
    ASSERT_FALSE(tj.is_null());
    tj[json::json_pointer(pointer)] = value;
    write_text(path("tokenizer.json"), tj.dump());
    try {
      Tokenizer::from_hf_json(path("tokenizer.json"));
      ADD_FAILURE() << pointer << " = " << value.dump() << " was accepted";
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path("tokenizer.json")), std::string::npos) << e.what();
    }
  }
};

TEST_F(TokenizerRefusal, UnsupportedModels) {
  expect_refused("/model/type", "WordPiece", "model type 'WordPiece' is not supported");
  expect_refused("/model/type", "Unigram", "model type 'Unigram' is not supported");
  expect_refused("/model/dropout", 0.1, "BPE dropout is not supported");
  expect_refused("/model/continuing_subword_prefix", "##", "continuing_subword_prefix is not supported");
}

TEST_F(TokenizerRefusal, UnsupportedPreTokenizers) {
  expect_refused("/pre_tokenizer", json{{"type", "BertPreTokenizer"}}, "pre_tokenizer type 'BertPreTokenizer' is not supported");
  expect_refused("/pre_tokenizer", json{{"type", "CharDelimiterSplit"}, {"delimiter", "x"}},
                 "pre_tokenizer type 'CharDelimiterSplit' is not supported");
  expect_refused("/pre_tokenizer",
                 json{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithBoth"}, {"invert", false}},
                 "Split behavior 'MergedWithBoth' is not supported");
  expect_refused("/pre_tokenizer", json{{"type", "Punctuation"}, {"behavior", "Sideways"}},
                 "Punctuation behavior 'Sideways' is not supported");
  expect_refused("/pre_tokenizer", json{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
                 "does not compile");
}

TEST_F(TokenizerRefusal, UnsupportedNormalizersDecodersAndProcessors) {
  expect_refused("/normalizer", json{{"type", "StripAccents"}}, "normalizer type 'StripAccents' is not supported");
  expect_refused("/normalizer", json{{"type", "Replace"}, {"pattern", {{"Regex", "(unclosed"}}}, {"content", ""}},
                 "normalizer Replace: regex '(unclosed' does not compile");
  expect_refused("/normalizer", json{{"type", "BertNormalizer"}}, "normalizer type 'BertNormalizer' is not supported");
  expect_refused("/decoder", json{{"type", "WordPiece"}}, "decoder type 'WordPiece' is not supported");
  expect_refused("/post_processor", json{{"type", "Weird"}}, "post_processor type 'Weird' is not supported");
}

TEST_F(TokenizerRefusal, BrokenStructure) {
  expect_refused("/model/merges/0", "Ġ zzz", "not in the vocabulary");
  expect_refused("/model/vocab", json::array(), "vocab is not an object");
  write_text(path("bad.json"), "{ not json");
  EXPECT_THROW(Tokenizer::from_hf_json(path("bad.json")), LoadError);
  EXPECT_THROW(Tokenizer::from_hf_json(path("missing.json")), LoadError);
}

TEST_F(TokenizerRefusal, NormalizedAddedTokenUnderRewritingNormalizer) {
  json tj;
  for (const json& f : read_json(kFixtures + "/features.json"))
    if (f["name"] == "spm_legacy") tj = f["tokenizer"];
  tj["added_tokens"].push_back({{"id", 3}, {"content", "zz"}, {"special", false}, {"normalized", true},
                                {"lstrip", false}, {"rstrip", false}, {"single_word", false}});
  try {
    Tokenizer::from_hf_json_text(tj.dump(), "", "in-memory.json");
    ADD_FAILURE() << "accepted";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("added token 'zz' with normalized=true"), std::string::npos) << e.what();
  }
}

// Writes a GGUF holding only tokenizer metadata.
void write_vocab_gguf(const std::string& path, const std::string& model, const std::string& pre) {
  GgufWriter w(path);
  w.add_string("tokenizer.ggml.model", model);
  if (!pre.empty()) w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.add_string_array("tokenizer.ggml.merges", {"a b"});
  w.finish();
}

TEST_F(TokenizerRefusal, GgufModelsAndPreTokenizers) {
  write_vocab_gguf(path("bert.gguf"), "bert", "");
  try {
    Tokenizer::for_model(path("bert.gguf"));
    ADD_FAILURE() << "accepted";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("model 'bert' is not supported"), std::string::npos) << e.what();
  }
  write_vocab_gguf(path("falcon.gguf"), "gpt2", "falcon");
  try {
    Tokenizer::for_model(path("falcon.gguf"));
    ADD_FAILURE() << "accepted";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("pre 'falcon' is not supported"), std::string::npos) << e.what();
  }
  write_vocab_gguf(path("llama3.gguf"), "gpt2", "llama-bpe");
  EXPECT_EQ(Tokenizer::for_model(path("llama3.gguf")).encode("abab"), (std::vector<int32_t>{2, 2}));
}

// A SentencePiece ModelProto written field by field.
std::string proto_varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s += static_cast<char>((v & 0x7F) | 0x80);
  return s + static_cast<char>(v);
}
std::string proto_bytes(uint32_t field, const std::string& b) { return proto_varint(field << 3 | 2) + proto_varint(b.size()) + b; }
std::string proto_int(uint32_t field, uint64_t v) { return proto_varint(field << 3) + proto_varint(v); }

std::string tiny_sentencepiece_model(int model_type, const std::string& normalizer_name = "identity") {
  std::string m;
  for (const char* p : {"<unk>", "<s>", "</s>", "a", "b", "ab"}) {
    const std::string piece = std::string(p) == "ab" ? proto_bytes(1, p) + proto_int(3, 1) : proto_bytes(1, p);
    m += proto_bytes(1, piece);
  }
  m += proto_bytes(2, proto_int(3, static_cast<uint64_t>(model_type)));
  m += proto_bytes(3, proto_bytes(1, normalizer_name));
  return m;
}

TEST_F(TokenizerRefusal, SentencePieceModels) {
  write_text(path("unigram.model"), tiny_sentencepiece_model(1));
  try {
    Tokenizer::from_sentencepiece_model(path("unigram.model"));
    ADD_FAILURE() << "a UNIGRAM model was accepted";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("model_type UNIGRAM is not supported"), std::string::npos) << e.what();
  }
  write_text(path("nfkc.model"), tiny_sentencepiece_model(2, "nmt_nfkc"));
  EXPECT_THROW(Tokenizer::from_sentencepiece_model(path("nfkc.model")), LoadError);
  write_text(path("truncated.model"), tiny_sentencepiece_model(2).substr(0, 9));
  EXPECT_THROW(Tokenizer::from_sentencepiece_model(path("truncated.model")), LoadError);

  write_text(path("bpe.model"), tiny_sentencepiece_model(2));
  const auto tok = Tokenizer::from_sentencepiece_model(path("bpe.model"));
  EXPECT_EQ(tok.vocab_size(), 6);
  EXPECT_EQ(tok.token_to_id("ab"), 5);
}

TEST(Tokenizer, InvalidUtf8IsRepairedLikeLossyDecoding) {
  const auto tok = Tokenizer::from_hf_json(kModels + "/tokenizers/qwen3/tokenizer.json");
  EXPECT_EQ(tok.encode("a\xff" "b\xe2\x82", false), tok.encode("a\xEF\xBF\xBD" "b\xEF\xBF\xBD", false));
  const std::string with_nul("nul\0byte", 8);  // a NUL is text like any other, not an end
  EXPECT_EQ(tok.decode(tok.encode(with_nul, false)), with_nul);
}

TEST(Tokenizer, QwenMetadataAndSpecialTokens) {
  const auto tok = Tokenizer::from_hf_dir(kModels + "/tokenizers/qwen3");
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_EQ(tok.eos_id(), 151645);
  EXPECT_FALSE(tok.bos_id().has_value());
  EXPECT_EQ(tok.eos_ids(), std::vector<int32_t>{151645});
  EXPECT_NE(tok.chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(tok.vocab_size(), 151669);
  const auto ids = tok.encode("<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_EQ(tok.decode(ids, true), "user\nhi");
  EXPECT_EQ(tok.decode(ids, false), "<|im_start|>user\nhi<|im_end|>");
}

TEST(Tokenizer, ForModelFindsEachFormat) {
  EXPECT_EQ(Tokenizer::for_model(kModels + "/stories260K/hf").encode("Once upon a time"),
            (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(Tokenizer::for_model(kModels + "/stories260K/stories260K.gguf").encode("Once upon a time"),
            (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(Tokenizer::for_model(kModels + "/tokenizers/gpt2").encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(Tokenizer::for_model(kModels + "/tokenizers/mistral-v1/tokenizer.model").bos_id(), 1);
  EXPECT_THROW(Tokenizer::for_model(kModels + "/no-such-model"), LoadError);
  const auto phi3 = Tokenizer::for_model(kModels + "/vocab/ggml-vocab-phi-3.gguf");
  EXPECT_EQ(phi3.eos_token(), "<|endoftext|>");
  EXPECT_EQ(phi3.bos_token(), "<s>");
  EXPECT_NE(phi3.chat_template().find("<|assistant|>"), std::string::npos);
}

}  // namespace
}  // namespace orzo
