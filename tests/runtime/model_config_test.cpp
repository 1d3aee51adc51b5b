// ModelConfig from HF config.json text and from GGUF metadata: what is read, what is
// refused (by name), and RoPE frequency tables.
#include "runtime/model_config.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/load_error.hpp"
#include "formats/gguf.hpp"
#include "formats/gguf_writer.hpp"
#include "runtime/model.hpp"
#include "tests/support/temp_dir.hpp"

namespace orzo {
namespace {

std::string llama_json(const std::string& extra = "", const std::string& arch = "LlamaForCausalLM") {
  return R"({"architectures": [")" + arch + R"("], "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128,
    "rms_norm_eps": 1e-5, "max_position_embeddings": 256, "bos_token_id": 1, "eos_token_id": 2)" +
         extra + "}";
}

// The LoadError message for `json`, or "" when it parses.
std::string error_of(const std::string& json, const std::string& generation = "") {
  try {
    parse_hf_config(json, generation, "/m/config.json");
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, ReadsALlamaConfig) {
  const auto c = parse_hf_config(llama_json(), "", "x");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.rope_style, RopeStyle::HalfSplit);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
}

TEST(ModelConfig, ArchitectureFlags) {
  EXPECT_TRUE(parse_hf_config(llama_json("", "Qwen2ForCausalLM"), "", "x").qkv_bias);
  EXPECT_FALSE(parse_hf_config(llama_json("", "Qwen2ForCausalLM"), "", "x").o_bias);
  const auto q3 = parse_hf_config(llama_json(R"(, "head_dim": 32)", "Qwen3ForCausalLM"), "", "x");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(q3.head_dim, 32);
  EXPECT_EQ(q3.q_dim(), 128);
  const auto mistral = parse_hf_config(llama_json(R"(, "sliding_window": 4096)", "MistralForCausalLM"), "", "x");
  EXPECT_EQ(mistral.sliding_window.value_or(0), 4096);
  EXPECT_FALSE(parse_hf_config(llama_json(R"(, "sliding_window": null)", "MistralForCausalLM"), "", "x").sliding_window);
  // Qwen configs carry a sliding_window that transformers ignores unless use_sliding_window.
  EXPECT_FALSE(parse_hf_config(llama_json(R"(, "sliding_window": 4, "use_sliding_window": false)", "Qwen2ForCausalLM"), "", "x")
                   .sliding_window);
  const auto biased = parse_hf_config(llama_json(R"(, "attention_bias": true)"), "", "x");
  EXPECT_TRUE(biased.qkv_bias && biased.o_bias);
}

TEST(ModelConfig, EosIdsComeFromBothFiles) {
  const auto c = parse_hf_config(llama_json(), R"({"eos_token_id": [2, 5, 7]})", "x");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2, 5, 7}));
}

TEST(ModelConfig, OldAndNewRopeSpellingsAgree) {
  const auto old_style = parse_hf_config(
      llama_json(R"(, "rope_theta": 500000, "rope_scaling": {"rope_type": "llama3", "factor": 8,
                   "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64})"),
      "", "x");
  const auto new_style = parse_hf_config(
      llama_json(R"(, "rope_parameters": {"rope_theta": 500000, "rope_type": "llama3", "factor": 8,
                   "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64})"),
      "", "x");
  EXPECT_EQ(old_style.rope_theta, 500000.0);
  EXPECT_EQ(new_style.rope_theta, 500000.0);
  EXPECT_EQ(rope_inv_freq(old_style), rope_inv_freq(new_style));
}

TEST(ModelConfig, Llama3ScalingKeepsHighAndSlowsLowFrequencies) {
  auto c = parse_hf_config(llama_json(R"(, "rope_theta": 500000)"), "", "x");
  const auto plain = rope_inv_freq(c);
  c.rope_scaling = {RopeScaling::Type::Llama3, 8.0, 1.0, 4.0, 64};
  const auto scaled = rope_inv_freq(c);
  ASSERT_EQ(plain.size(), 8u);
  EXPECT_EQ(scaled[0], plain[0]);  // wavelength 2π < 64/4: kept
  EXPECT_FLOAT_EQ(scaled.back(), plain.back() / 8);  // wavelength far above 64: divided
  c.rope_scaling = {RopeScaling::Type::Linear, 2.0, 1.0, 4.0, 64};
  EXPECT_FLOAT_EQ(rope_inv_freq(c)[3], plain[3] / 2);
}

TEST(ModelConfig, RefusesWhatItCannotRunByName) {
  EXPECT_NE(error_of(llama_json("", "GPT2LMHeadModel")).find("GPT2LMHeadModel"), std::string::npos);
  EXPECT_NE(error_of(llama_json("", "Qwen2MoeForCausalLM")).find("Qwen2MoeForCausalLM"), std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "hidden_act": "gelu")")).find("gelu"), std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4})")).find("yarn"),
            std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "use_sliding_window": true)", "Qwen2ForCausalLM")).find("use_sliding_window"),
            std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "mlp_bias": true)")).find("mlp_bias"), std::string::npos);
}

TEST(ModelConfig, BadValuesAreClearErrors) {
  EXPECT_NE(error_of("{not json").find("/m/config.json"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"architectures": ["LlamaForCausalLM"]})").find("vocab_size"), std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "num_key_value_heads": 3)")).find("multiple"), std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "hidden_size": "big")")).find("hidden_size"), std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "rms_norm_eps": -1)")).find("rms_norm_eps"), std::string::npos);
  EXPECT_NE(error_of(llama_json(), R"({"eos_token_id": 100000})").find("eos"), std::string::npos);
  EXPECT_NE(error_of(llama_json(), "{oops").find("generation_config"), std::string::npos);
}

using GgufConfig = testing::TempDirTest;

TEST_F(GgufConfig, UnsupportedArchitectureIsNamed) {
  GgufWriter w(path("gpt2.gguf"));
  w.add_string("general.architecture", "gpt2");
  w.finish();
  try {
    Model::load(path("gpt2.gguf"));
    FAIL() << "loaded a gpt2 GGUF";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("\"gpt2\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path("gpt2.gguf")), std::string::npos) << e.what();
  }
}

TEST_F(GgufConfig, MissingKeyIsNamed) {
  GgufWriter w(path("m.gguf"));
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.embedding_length", 64);
  w.finish();
  try {
    Model::load(path("m.gguf"));
    FAIL() << "loaded a GGUF without block_count";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("llama.feed_forward_length"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orzo
