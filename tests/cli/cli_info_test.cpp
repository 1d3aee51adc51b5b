// `orzo info` as a user runs it: the shape, tensor types and tokenizer of GGUF files and HF
// directories, the same as one JSON object, architectures orzo cannot run described from
// their keys, and bad input ending in one clear line and a non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf.hpp"
#include "formats/gguf_writer.hpp"
#include "formats/safetensors.hpp"
#include "tests/support/cli_harness.hpp"
#include "tests/support/temp_dir.hpp"

namespace orzo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CliRun;
using testing::orzo;

const std::string kStories = std::string(ORZO_FIXTURES_DIR) + "/../../assets/stories260K/stories260K.gguf";
const std::string kSmolLM2 =
    std::string(ORZO_SHARED_DIR) + "/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kStoriesHf = std::string(ORZO_SHARED_DIR) + "/models/stories260K/hf";

json info_json(const std::string& model, const std::string& flags = "") {
  const CliRun r = orzo("info --json " + flags + " '" + model + "'", false);
  EXPECT_EQ(r.status, 0) << r.out;
  return json::parse(r.out);
}

std::string info_text(const std::string& model, const std::string& flags = "") {
  const CliRun r = orzo("info " + flags + " '" + model + "'");
  EXPECT_EQ(r.status, 0) << r.out;
  return r.out;
}

void expect_contains(const std::string& out, const std::string& want) {
  EXPECT_NE(out.find(want), std::string::npos) << "no \"" << want << "\" in:\n" << out;
}

struct TypeUse {
  int64_t count = 0;
  uint64_t bytes = 0;
};

// What orzo's own reader finds in the tensors, to hold the reported mix and sums to.
struct TensorSums {
  int64_t parameters = 0;
  std::map<std::string, TypeUse> types;
};

TensorSums sums_of(const std::vector<TensorView>& tensors) {
  TensorSums s;
  for (const auto& t : tensors) {
    s.parameters += t.numel();
    std::string type = dtype_name(t.dtype);
    for (auto& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ++s.types[type].count;
    s.types[type].bytes += t.nbytes;
  }
  return s;
}

void expect_tensor_types(const json& j, const TensorSums& want) {
  ASSERT_TRUE(j["tensor_types"].is_object()) << j.dump();
  EXPECT_EQ(j["tensor_types"].size(), want.types.size()) << j["tensor_types"].dump();
  int64_t count = 0;
  for (const auto& [type, use] : want.types) {
    SCOPED_TRACE(type);
    ASSERT_TRUE(j["tensor_types"].contains(type)) << j["tensor_types"].dump();
    EXPECT_EQ(j["tensor_types"][type]["count"], use.count);
    EXPECT_EQ(j["tensor_types"][type]["bytes"], use.bytes);
    count += use.count;
  }
  EXPECT_EQ(j["tensors"], count);
  EXPECT_EQ(j["parameters"], want.parameters);
}

TEST(Info, DescribesTheVendoredStories260K) {
  const json j = info_json(kStories);
  EXPECT_EQ(j["format"], "gguf");
  EXPECT_EQ(j["gguf_version"], 3);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["runnable"], true);
  EXPECT_EQ(j["layers"], 5);
  EXPECT_EQ(j["hidden_size"], 64);
  EXPECT_EQ(j["ffn_size"], 172);
  EXPECT_EQ(j["heads"], 8);
  EXPECT_EQ(j["kv_heads"], 4);
  EXPECT_EQ(j["head_dim"], 8);
  EXPECT_EQ(j["vocab_size"], 512);
  EXPECT_EQ(j["context_length"], 2048);
  EXPECT_EQ(j["rope"]["theta"], 10000.0);
  EXPECT_EQ(j["rope"]["scaling"], "none");
  EXPECT_NEAR(j["norm_eps"].get<double>(), 1e-5, 1e-12);
  EXPECT_EQ(j["tied_embeddings"], false);  // it stores output.weight, a copy of token_embd
  EXPECT_EQ(j["file_bytes"], fs::file_size(kStories));
  // 48 F32 tensors whose elements, the parameters, add up as the reader sees them.
  const TensorSums sums = sums_of(read_gguf(kStories).tensors);
  EXPECT_EQ(sums.parameters, 292800);
  EXPECT_EQ(sums.types.size(), 1u);
  expect_tensor_types(j, sums);
  const json& tok = j["tokenizer"];
  EXPECT_EQ(tok["kind"], "llama");
  EXPECT_EQ(tok["vocab_size"], 512);
  EXPECT_EQ(tok["bos"], json({{"id", 1}, {"text", "<s>"}}));
  EXPECT_EQ(tok["eos"], json({{"id", 2}, {"text", "</s>"}}));
  EXPECT_EQ(tok["unk"], json({{"id", 0}, {"text", "<unk>"}}));
  EXPECT_TRUE(tok["pad"].is_null()) << "the file's padding id is 0xFFFFFFFF, i.e. none";
  EXPECT_EQ(tok["chat_template"], false);

  const std::string text = info_text(kStories);
  expect_contains(text, "architecture:    llama\n");
  expect_contains(text, "parameters:      292.8K (292800)\n");
  expect_contains(text, "f32: 48 tensors, 1.1 MiB\n");
  expect_contains(text, "chat template:   none\n");
}

TEST(Info, DescribesSmolLM2AsDownloaded) {
  if (!fs::exists(kSmolLM2)) GTEST_SKIP() << kSmolLM2 << " is absent (../shared/models/README.md, section 7)";
  const std::string text = info_text(kSmolLM2);
  for (const char* want : {"architecture:    llama\n", "parameters:      134.5M (134515008)\n", "layers:          30\n",
                           "hidden size:     576\n", "FFN size:        1536\n", "heads:           9 (KV heads 3)\n",
                           "head dim:        64\n", "vocabulary:      49152\n", "context length:  8192\n",
                           "RoPE:            theta 100000, no scaling\n", "tied embeddings: yes\n",
                           "tensors:         272\n", "  q4_1: 210 tensors, 63.3 MiB\n", "  q8_0: 1 tensor, 28.7 MiB\n",
                           "  f32: 61 tensors, 137.2 KiB\n", "tokenizer:       gpt2 (pre smollm), 49152 tokens\n"})
    expect_contains(text, want);
  // Sorted by bytes: the Q4_1 matrices, then the Q8_0 embedding, then the F32 norms.
  EXPECT_LT(text.find("q4_1:"), text.find("q8_0:"));
  EXPECT_LT(text.find("q8_0:"), text.find("f32:"));

  const json j = info_json(kSmolLM2);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["layers"], 30);
  EXPECT_EQ(j["hidden_size"], 576);
  EXPECT_EQ(j["tied_embeddings"], true);
  const GgufFile f = read_gguf(kSmolLM2);
  const TensorSums sums = sums_of(f.tensors);
  EXPECT_EQ(sums.types.at("q4_1").count, 210);
  EXPECT_EQ(sums.types.at("q8_0").count, 1);
  EXPECT_EQ(sums.types.at("f32").count, 61);
  expect_tensor_types(j, sums);
  EXPECT_EQ(j["tensor_types"]["q4_1"]["bytes"], 66355200u);  // as the gguf Python package counts them
  EXPECT_EQ(j["tensor_types"]["q8_0"]["bytes"], 30081024u);
  EXPECT_EQ(j["tokenizer"]["kind"], "gpt2");
  EXPECT_EQ(j["tokenizer"]["pre"], "smollm");
  EXPECT_EQ(j["tokenizer"]["chat_template"], true);
  EXPECT_EQ(j["tokenizer"]["pad"]["id"], 2);

  // --template: the template's first lines, as the file stores them.
  const std::string tmpl = f.metadata.get_string("tokenizer.chat_template");
  const std::string first_line = tmpl.substr(0, tmpl.find('\n'));
  ASSERT_FALSE(first_line.empty());
  EXPECT_EQ(text.find(first_line), std::string::npos) << "the template is shown only with --template";
  expect_contains(info_text(kSmolLM2, "--template"), "\n" + first_line + "\n");
  EXPECT_EQ(info_json(kSmolLM2, "--template")["tokenizer"]["chat_template_lines"][0], first_line);
}

TEST(Info, DescribesAnHfDirectory) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/qwen3";
  const json j = info_json(dir);
  EXPECT_EQ(j["format"], "hf");
  EXPECT_EQ(j["architecture"], "Qwen3ForCausalLM");
  EXPECT_EQ(j["model_type"], "qwen3");
  EXPECT_EQ(j["runnable"], true);
  EXPECT_EQ(j["layers"], 2);
  EXPECT_EQ(j["hidden_size"], 32);
  EXPECT_EQ(j["ffn_size"], 64);
  EXPECT_EQ(j["heads"], 4);
  EXPECT_EQ(j["kv_heads"], 2);
  EXPECT_EQ(j["head_dim"], 16);  // stated, and not hidden / heads
  EXPECT_EQ(j["vocab_size"], 128);
  EXPECT_EQ(j["context_length"], 256);
  EXPECT_EQ(j["rope"]["theta"], 1000000.0);
  EXPECT_EQ(j["tied_embeddings"], false);
  EXPECT_TRUE(j["tokenizer"].is_null()) << "the fixture has no tokenizer.json";
  const SafetensorsFile f = read_safetensors(dir + "/model.safetensors");
  EXPECT_EQ(j["file_bytes"], f.file->size());
  expect_tensor_types(j, sums_of(f.tensors));
  expect_contains(info_text(dir), "architecture:    Qwen3ForCausalLM (model_type qwen3)\n");
}

// Phi-3: LongRope from its original context, RoPE on part of each head; the same from HF and GGUF.
TEST(Info, DescribesPhi3sRope) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/phi3";
  for (const std::string& path : {dir, dir + "/model-f32.gguf"}) {
    SCOPED_TRACE(path);
    const json j = info_json(path);
    EXPECT_EQ(j["runnable"], true);
    EXPECT_EQ(j["rope"], json({{"theta", 10000.0}, {"scaling", "longrope"}, {"factor", 8.0}, {"original_context", 32},
                               {"rotary_dim", 12}}));
    EXPECT_EQ(j["sliding_window"], json({{"size", 40}, {"layers", 2}, {"local_rope_theta", nullptr}}));
    expect_contains(info_text(path), "RoPE:            theta 10000, longrope scaling x8 from 32, on 12 of 16 dims\n");
  }
}

TEST(Info, DescribesAnHfTokenizer) {
  if (!fs::exists(kStoriesHf)) GTEST_SKIP() << kStoriesHf << " is absent";
  const json j = info_json(kStoriesHf);
  EXPECT_EQ(j["tied_embeddings"], true);
  const json& tok = j["tokenizer"];
  EXPECT_EQ(tok["kind"], "BPE");
  EXPECT_EQ(tok["vocab_size"], 512);
  EXPECT_EQ(tok["bos"], json({{"id", 1}, {"text", "<s>"}}));
  EXPECT_EQ(tok["eos"], json({{"id", 2}, {"text", "</s>"}}));
  EXPECT_EQ(tok["unk"], json({{"id", 0}, {"text", "<unk>"}}));
  EXPECT_TRUE(tok["pad"].is_null());
  EXPECT_EQ(tok["chat_template"], false);
}

using InfoFiles = testing::TempDirTest;

// An architecture orzo cannot run is described from the keys it states; a value stored per
// layer (an array) or not stated at all is shown as unknown, not guessed.
TEST_F(InfoFiles, AnArchitectureOrzoCannotRunIsStillDescribed) {
  const std::string file = path("other.gguf");
  GgufWriter w(file);
  w.add_string("general.architecture", "gemma3");
  w.add_u32("gemma3.block_count", 3);
  w.add_u32("gemma3.embedding_length", 64);
  w.add_i32_array("gemma3.feed_forward_length", {128, 128, 256});
  w.add_u32("gemma3.attention.head_count", 4);
  w.add_u32("gemma3.attention.head_count_kv", 1);
  w.add_f32("gemma3.rope.freq_base", 1e6f);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>"});
  w.add_u32("tokenizer.ggml.bos_token_id", 2);
  w.add_tensor("token_embd.weight", DType::Q8_0, {3, 64});
  w.add_tensor("output_norm.weight", DType::F32, {64});
  const std::vector<uint8_t> zeros(3 * dtype_row_bytes(DType::Q8_0, 64) + 64 * 4);
  w.write_tensor_data(zeros.data(), 3 * dtype_row_bytes(DType::Q8_0, 64));
  w.write_tensor_data(zeros.data(), 64 * 4);
  w.finish();

  const json j = info_json(file);
  EXPECT_EQ(j["architecture"], "gemma3");
  EXPECT_EQ(j["runnable"], false);
  EXPECT_NE(j["not_runnable_reason"].get<std::string>().find("gemma3"), std::string::npos) << j.dump();
  EXPECT_EQ(j["layers"], 3);
  EXPECT_EQ(j["hidden_size"], 64);
  EXPECT_TRUE(j["ffn_size"].is_null());
  EXPECT_EQ(j["heads"], 4);
  EXPECT_EQ(j["kv_heads"], 1);
  EXPECT_TRUE(j["head_dim"].is_null());
  EXPECT_EQ(j["vocab_size"], 3);  // no vocab_size key: the tokenizer's tokens
  EXPECT_EQ(j["rope"]["theta"], 1e6);
  EXPECT_EQ(j["parameters"], 3 * 64 + 64);
  EXPECT_EQ(j["tokenizer"]["bos"], json({{"id", 2}, {"text", "<bos>"}}));
  const std::string text = info_text(file);
  expect_contains(text, "architecture:    gemma3\n                 not supported for running: ");
  expect_contains(text, "FFN size:        ?\n");
}

// The Gemma 3 GGUF of ../shared/models/fetch.sh, where it has been fetched.
TEST(Info, DescribesGemma3) {
  const char* cache = std::getenv("ORZO_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const std::string file = (cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/orzo-models") +
                           "/gemma-3-270m-q4_k_m/gemma-3-270m-q4_k_m.gguf";
  if (!fs::exists(file)) GTEST_SKIP() << file << " is absent (../shared/models/fetch.sh gemma-3-270m-q4_k_m)";
  const json j = info_json(file);
  EXPECT_EQ(j["architecture"], "gemma3");
  EXPECT_EQ(j["runnable"], true) << j.dump();
  EXPECT_EQ(j["sliding_window"], json({{"size", 512}, {"layers", 15}, {"local_rope_theta", 10000.0}}));
  EXPECT_EQ(j["layers"], 18);
  EXPECT_EQ(j["hidden_size"], 640);
  EXPECT_EQ(j["ffn_size"], 2048);
  EXPECT_EQ(j["heads"], 4);
  EXPECT_EQ(j["kv_heads"], 1);
  EXPECT_EQ(j["head_dim"], 256);
  EXPECT_EQ(j["vocab_size"], 262144);
  EXPECT_EQ(j["context_length"], 32768);
  expect_tensor_types(j, sums_of(read_gguf(file).tensors));
  for (const char* type : {"f32", "q8_0", "q5_0", "q4_k", "q6_k"})
    EXPECT_TRUE(j["tensor_types"].contains(type)) << type;
  EXPECT_EQ(j["tokenizer"]["kind"], "llama");
  EXPECT_EQ(j["tokenizer"]["chat_template"], false);
}

// The experts as the forward pass will run them, from both forms of a fixture.
TEST(Info, DescribesMixtureOfExperts) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/qwen2moe";
  const json experts = {{"count", 8}, {"per_token", 2}, {"ffn_size", 32}, {"shared_ffn_size", 48}, {"layers", 2}};
  for (const std::string& model : {dir, dir + "/model-f32.gguf"}) {
    const json j = info_json(model);
    EXPECT_EQ(j["runnable"], true) << model;
    EXPECT_EQ(j["experts"], experts) << model;
  }
  EXPECT_NE(info_text(dir).find("experts:         8, 2 per token, FFN size 32, a shared one of 48, on 2 of 3 layers"),
            std::string::npos)
      << info_text(dir);
  EXPECT_EQ(info_json(std::string(ORZO_FIXTURES_DIR) + "/llama")["experts"], nullptr);
}

TEST_F(InfoFiles, BadInputIsOneLineAndNonZero) {
  testing::Bytes truncated = testing::read_bytes(kStories);
  truncated.resize(truncated.size() / 2);
  testing::write_bytes(path("half.gguf"), truncated);
  testing::write_bytes(path("text.gguf"), {'h', 'e', 'l', 'l', 'o'});
  fs::create_directories(path("empty"));
  const struct {
    std::string args, expect;
  } cases[] = {
      {"info " + path("missing.gguf"), "orzo: error: " + path("missing.gguf") + ": no such file or directory"},
      {"info " + path("half.gguf"), "orzo: error: " + path("half.gguf") + ": "},
      {"info --json " + path("half.gguf"), "orzo: error: " + path("half.gguf") + ": "},
      {"info " + path("text.gguf"), "orzo: error: " + path("text.gguf") + ": "},
      {"info " + path("empty"), "orzo: error: " + path("empty") + ": a directory without config.json"},
  };
  for (const auto& c : cases) {
    testing::expect_refused(c.args, c.expect);
    const CliRun r = orzo(c.args);
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << " printed: " << r.out;
  }
  testing::expect_refused("info", "model");
}

}  // namespace
}  // namespace orzo
