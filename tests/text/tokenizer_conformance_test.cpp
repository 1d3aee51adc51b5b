// Published tokenizer test vectors, against the tokenizer files they were made with:
// swift-transformers' multilingual baselines (transformers 4.57.1, ids and both decodes)
// and llama.cpp's vocab vectors (HF ids without specials), for every family whose
// vocabulary is here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/gguf.hpp"
#include "formats/gguf_writer.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace orzo {
namespace {

const std::string kModels = std::string(ORZO_SHARED_DIR) + "/models";
const std::string kTok = kModels + "/tokenizers";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Compares every entry of a swift-transformers baseline file; `bos_dropped` says the
// baseline's ids start with a BOS that this tokenizer is not expected to add.
void check_swift(const Tokenizer& tok, const std::string& file) {
  const auto j = nlohmann::json::parse(read_file(kTok + "/conformance-swift-transformers/" + file));
  size_t ids_ok = 0, with_ok = 0, skip_ok = 0, n = 0;
  const auto inputs = nlohmann::json::parse(read_file(kTok + "/conformance-swift-transformers/inputs.json"));
  ASSERT_EQ(inputs.size(), j.at("entries").size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& e = j["entries"][i];
    ASSERT_EQ(inputs[i]["id"], e["id"]);
    const std::string text = inputs[i]["text"].get<std::string>();
    const auto expected = e["input_ids"].get<std::vector<int32_t>>();
    const auto ids = tok.encode(text);
    ++n;
    ids_ok += ids == expected;
    EXPECT_EQ(show(ids), show(expected)) << e["id"] << ": " << text;
    const std::string with = tok.decode(expected, false), skip = tok.decode(expected, true);
    with_ok += with == e["decoded_with_special"].get<std::string>();
    skip_ok += skip == e["decoded_skip_special"].get<std::string>();
    EXPECT_EQ(with, e["decoded_with_special"].get<std::string>()) << e["id"];
    EXPECT_EQ(skip, e["decoded_skip_special"].get<std::string>()) << e["id"];
  }
  std::cout << file << ": ids " << ids_ok << "/" << n << ", decoded_with_special " << with_ok << "/" << n
            << ", decoded_skip_special " << skip_ok << "/" << n << "\n";
}

// llama.cpp's X.gguf.inp / X.gguf.out: texts separated by a marker line, ids per line.
void check_llama_cpp(const Tokenizer& tok, const std::string& name) {
  const std::string inp = read_file(kModels + "/vocab/" + name + ".gguf.inp");
  const std::string out = read_file(kModels + "/vocab/" + name + ".gguf.out");
  const std::string marker = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0, hit; (hit = inp.find(marker, pos)) != std::string::npos; pos = hit + marker.size())
    texts.push_back(inp.substr(pos, hit - pos));
  std::vector<std::vector<int32_t>> expected;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<int32_t> ids;
    std::istringstream words(line);
    for (int32_t id; words >> id;) ids.push_back(id);
    expected.push_back(ids);
  }
  ASSERT_EQ(texts.size(), expected.size()) << name;
  size_t ok = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = tok.encode(texts[i], false);
    ok += ids == expected[i];
    EXPECT_EQ(show(ids), show(expected[i])) << name << " #" << i << ": '" << texts[i] << "'";
  }
  std::cout << name << ": " << ok << "/" << texts.size() << "\n";
}

Tokenizer gguf_tokenizer(const std::string& path) { return Tokenizer::from_gguf(read_gguf(path).metadata); }

TEST(TokenizerConformance, Qwen25SwiftTransformers) {
  const auto tok = Tokenizer::from_hf_json(kTok + "/qwen3/tokenizer.json", kTok + "/qwen2.5/tokenizer_config.json");
  check_swift(tok, "qwen2_5_multilingual.json");
}

TEST(TokenizerConformance, TinyLlamaSwiftTransformersWithPhi3) {
  // Phi-3's tokenizer.json adds no BOS; its tokenizer_config.json (add_bos_token) does.
  const auto tok = Tokenizer::from_hf_json(kTok + "/phi-3/tokenizer.json", kTok + "/phi-3/tokenizer_config.json");
  check_swift(tok, "tinyllama_multilingual.json");
}

TEST(TokenizerConformance, Gpt2SwiftTransformersVocabMerges) {
  check_swift(Tokenizer::from_gpt2_files(kTok + "/gpt2/vocab.json", kTok + "/gpt2/merges.txt"), "gpt2_multilingual.json");
}

TEST(TokenizerConformance, Gpt2SwiftTransformersGguf) {
  check_swift(gguf_tokenizer(kModels + "/vocab/ggml-vocab-gpt-2.gguf"), "gpt2_multilingual.json");
}

TEST(TokenizerConformance, LlamaCppGpt2) {
  check_llama_cpp(gguf_tokenizer(kModels + "/vocab/ggml-vocab-gpt-2.gguf"), "ggml-vocab-gpt-2");
}

TEST(TokenizerConformance, LlamaCppPhi3Gguf) {
  check_llama_cpp(gguf_tokenizer(kModels + "/vocab/ggml-vocab-phi-3.gguf"), "ggml-vocab-phi-3");
}

TEST(TokenizerConformance, LlamaCppLlamaSpmWithPhi3Json) {
  check_llama_cpp(Tokenizer::from_hf_json(kTok + "/phi-3/tokenizer.json"), "ggml-vocab-llama-spm");
}

TEST(TokenizerConformance, LlamaCppQwen2WithQwen3Json) {
  check_llama_cpp(Tokenizer::from_hf_json(kTok + "/qwen3/tokenizer.json"), "ggml-vocab-qwen2");
}

// The model cache ../shared/models/fetch.sh fills: $ORZO_MODEL_CACHE, else ~/.cache/orzo-models.
std::string model_cache() {
  if (const char* c = std::getenv("ORZO_MODEL_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/orzo-models";
}

TEST(TokenizerConformance, LlamaCppLlamaBpe) {
  const std::string path = model_cache() + "/llama3-tokenizer/tokenizer.json";
  if (!std::ifstream(path).good())
    GTEST_SKIP() << path << " is absent: run ../shared/models/fetch.sh llama3-tokenizer (or set ORZO_MODEL_CACHE)";
  check_llama_cpp(Tokenizer::from_hf_json(path), "ggml-vocab-llama-bpe");
}

// The same vocabulary as llama.cpp's converter writes it (tokens, merges, token types,
// tokenizer.ggml.pre = llama-bpe): the GGUF path must give the same ids, ignore_merges
// included.
TEST(TokenizerConformance, LlamaCppLlamaBpeGguf) {
  const std::string path = model_cache() + "/llama3-tokenizer/tokenizer.json";
  if (!std::ifstream(path).good())
    GTEST_SKIP() << path << " is absent: run ../shared/models/fetch.sh llama3-tokenizer (or set ORZO_MODEL_CACHE)";
  const auto tj = nlohmann::json::parse(read_file(path));
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](size_t id, const std::string& text, int32_t type) {
    if (id >= tokens.size()) {
      tokens.resize(id + 1);
      types.resize(id + 1, 1);
    }
    tokens[id] = text;
    types[id] = type;
  };
  for (const auto& [text, id] : tj["model"]["vocab"].items()) put(id.get<size_t>(), text, 1);
  for (const auto& a : tj["added_tokens"]) put(a["id"].get<size_t>(), a["content"].get<std::string>(), a["special"].get<bool>() ? 3 : 4);
  std::vector<std::string> merges;
  for (const auto& m : tj["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  const std::string gguf = testing::TempDir() + "llama-bpe-vocab.gguf";
  {
    GgufWriter w(gguf);
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "llama-bpe");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_i32_array("tokenizer.ggml.token_type", types);
    w.add_string_array("tokenizer.ggml.merges", merges);
    w.finish();
  }
  check_llama_cpp(gguf_tokenizer(gguf), "ggml-vocab-llama-bpe");
}

TEST(TokenizerConformance, Stories260KOnceUponATime) {
  const auto hf = Tokenizer::from_hf_dir(kModels + "/stories260K/hf");
  const auto gguf = gguf_tokenizer(kModels + "/stories260K/stories260K.gguf");
  const std::vector<int32_t> expected = {1, 403, 407, 261, 378};
  EXPECT_EQ(hf.encode("Once upon a time"), expected);
  EXPECT_EQ(gguf.encode("Once upon a time"), expected);
  EXPECT_EQ(hf.decode(expected), "Once upon a time");
  EXPECT_EQ(gguf.decode(expected, false), "<s> Once upon a time");  // as HF: Strip only at the start
}

TEST(TokenizerConformance, MistralV1ChatSample) {
  // mistral-common's v1 rendering: BOS, then each user turn encoded as
  // "[INST] {content} [/INST]" and each assistant turn as its content followed by EOS,
  // every piece with SentencePiece's dummy prefix.
  const auto tok = Tokenizer::from_sentencepiece_model(kTok + "/mistral-v1/tokenizer.model");
  const std::string dir = kTok + "/mistral-v1/chat_sample_no_tools/";
  const auto expected = nlohmann::json::parse(read_file(dir + "tokens_v1.json"))["tokens"].get<std::vector<int32_t>>();
  const auto sample = nlohmann::json::parse(read_file(dir + "sample.json"));
  EXPECT_EQ(tok.vocab_size(), 32000);
  ASSERT_TRUE(tok.bos_id() && tok.eos_id());
  std::vector<int32_t> ids = {*tok.bos_id()};
  for (const auto& m : sample["messages"]) {
    const std::string content = m["content"].get<std::string>();
    const auto piece = m["role"] == "user" ? tok.encode("[INST] " + content + " [/INST]", false) : tok.encode(content, false);
    ids.insert(ids.end(), piece.begin(), piece.end());
    if (m["role"] == "assistant") ids.push_back(*tok.eos_id());
  }
  EXPECT_EQ(show(ids), show(expected));
  EXPECT_EQ(tok.encode("Hello"), (std::vector<int32_t>{1, *tok.token_to_id("\xE2\x96\x81Hello")}));
}

}  // namespace
}  // namespace orzo
