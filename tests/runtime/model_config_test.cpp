// ModelConfig from HF config.json text and from GGUF metadata: what is read, what is
// refused (by name), and RoPE frequency tables.
#include "runtime/model_config.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

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
  c.rope_scaling = {RopeScaling::Type::Llama3, 8.0, 1.0, 4.0, 64, {}, {}, 1.0};
  const auto scaled = rope_inv_freq(c);
  ASSERT_EQ(plain.size(), 8u);
  EXPECT_EQ(scaled[0], plain[0]);  // wavelength 2π < 64/4: kept
  EXPECT_FLOAT_EQ(scaled.back(), plain.back() / 8);  // wavelength far above 64: divided
  c.rope_scaling = {RopeScaling::Type::Linear, 2.0, 1.0, 4.0, 64, {}, {}, 1.0};
  EXPECT_FLOAT_EQ(rope_inv_freq(c)[3], plain[3] / 2);
}

TEST(ModelConfig, RefusesWhatItCannotRunByName) {
  EXPECT_NE(error_of(llama_json("", "GPT2LMHeadModel")).find("GPT2LMHeadModel"), std::string::npos);
  EXPECT_NE(error_of(llama_json("", "DeepseekV2ForCausalLM")).find("DeepseekV2ForCausalLM"), std::string::npos);
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

std::string gemma_json(const std::string& arch, const std::string& extra = "") {
  return R"({"architectures": [")" + arch + R"("], "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32,
    "vocab_size": 128, "rms_norm_eps": 1e-6, "max_position_embeddings": 256,
    "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 64, "sliding_window": 16)" +
         extra + "}";
}

TEST(ModelConfig, ReadsGemma2) {
  const auto c = parse_hf_config(
      gemma_json("Gemma2ForCausalLM", R"(, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
                 "hidden_act": "gelu_pytorch_tanh")"),
      "", "x");
  EXPECT_EQ(c.architecture, "gemma2");
  EXPECT_EQ(c.activation, GateActivation::gelu_tanh);
  EXPECT_TRUE(c.sandwich_norms);
  EXPECT_EQ(c.norm_weight_offset, 1.0);
  EXPECT_DOUBLE_EQ(c.embed_scale, 8.0);
  EXPECT_DOUBLE_EQ(c.attention_scale(), 0.125);  // query_pre_attn_scalar 64, not head_dim 32
  EXPECT_EQ(c.attn_softcap.value_or(0), 50.0);
  EXPECT_EQ(c.final_softcap.value_or(0), 30.0);
  EXPECT_TRUE(c.tie_word_embeddings);  // Gemma's default
  EXPECT_FALSE(c.qk_norm);
  // Without layer_types (transformers 4 configs): even layers slide.
  for (int64_t l = 0; l < 12; ++l) EXPECT_EQ(c.window_of(l).has_value(), l % 2 == 0) << l;
  EXPECT_EQ(c.window_of(0).value_or(0), 16);
  EXPECT_FALSE(c.local_rope(0));
}

TEST(ModelConfig, ReadsGemma3InBothSpellings) {
  // transformers 4: rope_theta + rope_local_base_freq + rope_scaling for the global layers, and
  // a sliding_window_pattern instead of layer_types.
  const auto old = parse_hf_config(gemma_json("Gemma3ForCausalLM", R"(, "rope_theta": 1000000.0,
      "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
      "sliding_window_pattern": 6)"),
                                   "", "x");
  // transformers 5: layer_types and rope_parameters per layer type.
  std::string types = R"(, "layer_types": [)";
  for (int l = 0; l < 12; ++l) types += std::string(l ? ", " : "") + ((l + 1) % 6 ? "\"sliding_attention\"" : "\"full_attention\"");
  const auto fresh = parse_hf_config(gemma_json("Gemma3ForCausalLM", types + R"(], "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})"),
                                     "", "x");
  for (const auto* c : {&old, &fresh}) {
    EXPECT_EQ(c->architecture, "gemma3");
    EXPECT_TRUE(c->qk_norm);
    EXPECT_FALSE(c->attn_softcap);
    EXPECT_EQ(c->rope_theta, 1e6);
    EXPECT_EQ(c->rope_local_theta, 1e4);
    EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::Linear);
    for (int64_t l = 0; l < 12; ++l) {
      EXPECT_EQ(c->window_of(l).has_value(), (l + 1) % 6 != 0) << l;
      EXPECT_EQ(c->local_rope(l), (l + 1) % 6 != 0) << l;
    }
    // Local layers rotate at base 1e4 unscaled; global ones at 1e6 divided by the factor.
    const auto local = rope_inv_freq(*c, true), global = rope_inv_freq(*c);
    EXPECT_FLOAT_EQ(local[1], 1.0f / std::pow(1e4f, 2.0f / 32));
    EXPECT_FLOAT_EQ(global[1], 1.0f / std::pow(1e6f, 2.0f / 32) / 8);
  }
}

TEST(ModelConfig, ReadsSmolLM3LayersWithoutRope) {
  const auto listed = parse_hf_config(llama_json(R"(, "no_rope_layers": [1, 0])", "SmolLM3ForCausalLM"), "", "x");
  EXPECT_EQ(listed.architecture, "smollm3");
  EXPECT_TRUE(listed.rotates(0));
  EXPECT_FALSE(listed.rotates(1));
  // Only the interval (older configs): every interval-th layer has none.
  const auto interval = parse_hf_config(llama_json(R"(, "no_rope_layer_interval": 2)", "SmolLM3ForCausalLM"), "", "x");
  EXPECT_TRUE(interval.rotates(0));
  EXPECT_FALSE(interval.rotates(1));
  EXPECT_TRUE(parse_hf_config(llama_json(), "", "x").rotates(1));  // Llama: every layer
  EXPECT_NE(error_of(llama_json(R"(, "no_rope_layers": [1])", "SmolLM3ForCausalLM")).find("no_rope_layers"),
            std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "no_rope_layers": [1, 2])", "SmolLM3ForCausalLM")).find("no_rope_layers"),
            std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "use_sliding_window": true)", "SmolLM3ForCausalLM")).find("use_sliding_window"),
            std::string::npos);
}

TEST(ModelConfig, RefusesGemmaVariantsItCannotRun) {
  EXPECT_NE(error_of(gemma_json("Gemma3ForConditionalGeneration")).find("Gemma3ForConditionalGeneration"),
            std::string::npos);
  EXPECT_NE(error_of(gemma_json("Gemma3ForCausalLM", R"(, "use_bidirectional_attention": true)"))
                .find("use_bidirectional_attention"),
            std::string::npos);
  EXPECT_NE(error_of(gemma_json("Gemma3ForCausalLM", R"(, "layer_types": ["full_attention"])")).find("layer_types"),
            std::string::npos);
  EXPECT_NE(error_of(gemma_json("Gemma2ForCausalLM", R"(, "hidden_activation": "relu")")).find("relu"), std::string::npos);
  EXPECT_NE(error_of(gemma_json("Gemma3ForCausalLM", R"(, "rope_parameters": {"full_attention": {"rope_theta": 1e6},
      "sliding_attention": {"rope_type": "linear", "factor": 2.0}})"))
                .find("sliding-attention"),
            std::string::npos);
}

// Phi-3.5/Phi-4-mini as on the Hub (transformers 4: rope_scaling with "type", the partial
// rotary factor and the original context at the top level), and as transformers 5 writes it.
std::string phi3_json(const std::string& rope, const std::string& extra = "") {
  return R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128,
    "rms_norm_eps": 1e-5, "max_position_embeddings": 256, "sliding_window": 40, )" +
         rope + extra + "}";
}

const char* kPhi3Factors = R"("short_factor": [1, 1.25, 1.5, 2, 3, 4], "long_factor": [1, 2, 4, 8, 16, 32])";

TEST(ModelConfig, ReadsPhi3InBothSpellings) {
  const auto hub = parse_hf_config(
      phi3_json(R"("rope_theta": 10000.0, "partial_rotary_factor": 0.75, "original_max_position_embeddings": 32,
                   "rope_scaling": {"type": "longrope", )" + std::string(kPhi3Factors) + "}"),
      "", "x");
  const auto v5 = parse_hf_config(
      phi3_json(R"("original_max_position_embeddings": 32, "rope_parameters": {"rope_type": "longrope",
                   "rope_theta": 10000.0, "partial_rotary_factor": 0.75, "original_max_position_embeddings": 32, )" +
                std::string(kPhi3Factors) + "}"),
      "", "x");
  for (const auto& c : {hub, v5}) {
    EXPECT_EQ(c.architecture, "phi3");
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(c.rope_dim(), 12);  // int(16 * 0.75)
    EXPECT_EQ(c.rope_style, RopeStyle::HalfSplit);
    EXPECT_EQ(c.sliding_window.value_or(0), 40);
    const auto& s = c.rope_scaling;
    EXPECT_EQ(s.type, RopeScaling::Type::LongRope);
    EXPECT_EQ(s.short_factor, (std::vector<double>{1, 1.25, 1.5, 2, 3, 4}));
    EXPECT_EQ(s.long_factor, (std::vector<double>{1, 2, 4, 8, 16, 32}));
    EXPECT_EQ(s.original_max_position, 32);
    EXPECT_DOUBLE_EQ(s.factor, 8.0);  // max_position / original, as transformers takes it
    EXPECT_DOUBLE_EQ(s.attention_factor, std::sqrt(1 + std::log(8.0) / std::log(32.0)));
    EXPECT_FALSE(c.long_rope(32));  // contexts within the original length: the short factors
    EXPECT_TRUE(c.long_rope(33));
  }
  // Phi3Config reads the older name "su" as longrope; "factor" and "attention_factor" win.
  const auto su = parse_hf_config(
      phi3_json(R"("original_max_position_embeddings": 32, "rope_scaling": {"type": "su", "factor": 4,
                   "attention_factor": 1.5, "short_factor": [1, 1, 1, 1, 1, 1, 1, 1], "long_factor": [1, 1, 1, 1, 1, 1, 1, 2]})"),
      "", "x");
  EXPECT_EQ(su.rope_scaling.type, RopeScaling::Type::LongRope);
  EXPECT_EQ(su.rope_dim(), 16);
  EXPECT_EQ(su.rope_scaling.factor, 4.0);
  EXPECT_EQ(su.rope_scaling.attention_factor, 1.5);
  // Phi-3-mini-4k: no scaling at all.
  const auto plain = parse_hf_config(phi3_json(R"("rope_scaling": null, "original_max_position_embeddings": 4096)"), "", "x");
  EXPECT_EQ(plain.rope_scaling.type, RopeScaling::Type::None);
  EXPECT_FALSE(plain.long_rope(1 << 20));
}

// transformers' _compute_longrope_parameters: 1 / (factor * base ** (2i / rotary_dim)), f32.
TEST(ModelConfig, LongRopeDividesEachFrequencyByItsFactor) {
  const auto c = parse_hf_config(
      phi3_json(R"("partial_rotary_factor": 0.75, "original_max_position_embeddings": 32,
                   "rope_scaling": {"type": "longrope", )" + std::string(kPhi3Factors) + "}"),
      "", "x");
  const auto short_freq = rope_inv_freq(c), long_freq = rope_inv_freq(c, false, true);
  ASSERT_EQ(short_freq.size(), 6u);
  ASSERT_EQ(long_freq.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const float plain = 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / 12.0f);
    EXPECT_FLOAT_EQ(short_freq[i], plain / static_cast<float>(c.rope_scaling.short_factor[i])) << i;
    EXPECT_FLOAT_EQ(long_freq[i], plain / static_cast<float>(c.rope_scaling.long_factor[i])) << i;
  }
}

TEST(ModelConfig, RefusesPhi3RopeItCannotRun) {
  const std::string original = R"("original_max_position_embeddings": 32, )";
  EXPECT_NE(error_of(phi3_json(original + R"("rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1],
                                 "long_factor": [1, 1, 1]})")).find("longrope lists 3 factors, not rotary dims / 2 = 8"),
            std::string::npos);
  EXPECT_NE(error_of(phi3_json(original + R"("rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1]})"))
                .find("\"long_factor\""),
            std::string::npos);
  EXPECT_NE(error_of(phi3_json(original + R"("rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, 0],
                                 "long_factor": [1, 1, 1, 1, 1, 1, 1, 1]})")).find("positive"),
            std::string::npos);
  EXPECT_NE(error_of(phi3_json(original + R"("rope_scaling": {"type": "dynamic", "factor": 2})")).find("\"dynamic\""),
            std::string::npos);
  EXPECT_NE(error_of(phi3_json(R"("partial_rotary_factor": 1.5, "rope_scaling": null)")).find("partial_rotary_factor"),
            std::string::npos);
  EXPECT_NE(error_of(phi3_json(R"("partial_rotary_factor": 0.05, "rope_scaling": null)")).find("no dims"), std::string::npos);
  // int(16 * 0.3) = 4 dims is fine; int(16 * 0.2) = 3 cannot pair up.
  EXPECT_EQ(error_of(phi3_json(R"("partial_rotary_factor": 0.3, "rope_scaling": null)")), "");
  EXPECT_NE(error_of(phi3_json(R"("partial_rotary_factor": 0.2, "rope_scaling": null)")).find("rotary dims (3)"),
            std::string::npos);
  // "su" is Phi-3's own old name: a Llama with it is refused by name.
  EXPECT_NE(error_of(llama_json(R"(, "rope_scaling": {"type": "su", "short_factor": [1], "long_factor": [1]})")).find("\"su\""),
            std::string::npos);
}

using GgufConfig = testing::TempDirTest;

// What llama.cpp's loader assumes of Gemma GGUFs beyond their keys: Gemma 2 slides on even
// layers, Gemma 3 on all but every sixth with a local RoPE base of 10000, and the 27B models
// (46 and 62 layers) scale queries by hidden/heads instead of head_dim.
TEST_F(GgufConfig, GemmaTermsFollowLlamaCpp) {
  auto write = [&](const std::string& arch, uint32_t layers, bool caps) {
    const std::string file = path(arch + std::to_string(layers) + ".gguf"), p = arch + ".";
    GgufWriter w(file);
    w.add_string("general.architecture", arch);
    w.add_u32(p + "embedding_length", 128);
    w.add_u32(p + "feed_forward_length", 256);
    w.add_u32(p + "block_count", layers);
    w.add_u32(p + "attention.head_count", 2);
    w.add_u32(p + "attention.head_count_kv", 1);
    w.add_u32(p + "attention.key_length", 32);
    w.add_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
    w.add_u32(p + "attention.sliding_window", 8);
    if (caps) {
      w.add_f32(p + "attn_logit_softcapping", 50.0f);
      w.add_f32(p + "final_logit_softcapping", 30.0f);
    }
    w.add_tensor("token_embd.weight", DType::F32, {4, 128});
    const std::vector<float> zeros(4 * 128);
    w.write_tensor_data(zeros.data(), zeros.size() * sizeof(float));
    w.finish();
    return read_gguf_config(read_gguf(file));
  };
  const auto g2 = write("gemma2", 4, true);
  EXPECT_EQ(g2.attn_softcap.value_or(0), 50.0);
  EXPECT_EQ(g2.final_softcap.value_or(0), 30.0);
  EXPECT_EQ(g2.norm_weight_offset, 0.0);  // the converter stored 1 + w
  EXPECT_EQ(g2.rope_style, RopeStyle::HalfSplit);
  EXPECT_DOUBLE_EQ(g2.attention_scale(), 1.0 / std::sqrt(32.0));
  for (int64_t l = 0; l < 4; ++l) EXPECT_EQ(g2.window_of(l).has_value(), l % 2 == 0);
  EXPECT_DOUBLE_EQ(write("gemma2", 46, false).attention_scale(), 1.0 / 8.0);  // 27B: hidden / heads = 64

  const auto g3 = write("gemma3", 12, false);
  EXPECT_TRUE(g3.qk_norm);
  EXPECT_FALSE(g3.attn_softcap);
  EXPECT_EQ(g3.rope_local_theta, 10000.0);
  for (int64_t l = 0; l < 12; ++l) EXPECT_EQ(g3.local_rope(l), (l + 1) % 6 != 0);
  EXPECT_DOUBLE_EQ(write("gemma3", 62, false).attention_scale(), 1.0 / 8.0);
}

// The experts' keys as the Hub's configs spell them: Mixtral-8x7B (num_local_experts, always
// renormalized), Qwen1.5-MoE (a shared expert, probabilities as they are, decoder_sparse_step),
// Qwen3-30B-A3B (num_experts, norm_topk_prob, mlp_only_layers).
TEST(ModelConfig, ReadsTheExpertsOfEachFamily) {
  const auto mixtral = parse_hf_config(
      llama_json(R"(, "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": null)", "MixtralForCausalLM"),
      "", "x");
  EXPECT_EQ(mixtral.architecture, "mixtral");
  EXPECT_EQ(mixtral.num_experts, 8);
  EXPECT_EQ(mixtral.experts_per_token, 2);
  EXPECT_EQ(mixtral.expert_intermediate_size, 96);  // Mixtral's experts are intermediate_size wide
  EXPECT_TRUE(mixtral.norm_topk_prob);
  EXPECT_FALSE(mixtral.sliding_window);
  EXPECT_TRUE(mixtral.has_experts(0) && mixtral.has_experts(1));

  const auto qwen2 = parse_hf_config(llama_json(R"(, "num_experts": 60, "num_experts_per_tok": 4,
      "moe_intermediate_size": 32, "shared_expert_intermediate_size": 128, "decoder_sparse_step": 2)",
                                                "Qwen2MoeForCausalLM"),
                                     "", "x");
  EXPECT_EQ(qwen2.architecture, "qwen2moe");
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.norm_topk_prob);
  EXPECT_EQ(qwen2.shared_expert_intermediate_size, 128);
  EXPECT_FALSE(qwen2.has_experts(0));  // layer l has experts where (l + 1) % step == 0
  EXPECT_TRUE(qwen2.has_experts(1));

  const auto qwen3 = parse_hf_config(llama_json(R"(, "num_experts": 128, "num_experts_per_tok": 8,
      "moe_intermediate_size": 48, "norm_topk_prob": true, "mlp_only_layers": [0])",
                                                "Qwen3MoeForCausalLM"),
                                     "", "x");
  EXPECT_EQ(qwen3.architecture, "qwen3moe");
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_EQ(qwen3.num_experts, 128);
  EXPECT_EQ(qwen3.expert_intermediate_size, 48);
  EXPECT_TRUE(qwen3.norm_topk_prob);
  EXPECT_EQ(qwen3.shared_expert_intermediate_size, 0);
  EXPECT_FALSE(qwen3.has_experts(0));
  EXPECT_TRUE(qwen3.has_experts(1));
  EXPECT_FALSE(parse_hf_config(llama_json(), "", "x").has_experts(0));  // a dense model

  const std::string qwen3_moe = "Qwen3MoeForCausalLM";
  EXPECT_NE(error_of(llama_json(R"(, "num_experts": 4, "num_experts_per_tok": 5, "moe_intermediate_size": 8)", qwen3_moe))
                .find("num_experts_per_tok"),
            std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "num_experts": 4, "num_experts_per_tok": 2)", qwen3_moe)).find("moe_intermediate_size"),
            std::string::npos);
  EXPECT_NE(error_of(llama_json(R"(, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
                                   "mlp_only_layers": [2])",
                                qwen3_moe))
                .find("mlp_only_layers"),
            std::string::npos);
}

// llama.cpp's Phi-3 GGUFs: partial rotary as rope.dimension_count, LongRope's factors as two
// F32 tensors beside the original context and attention factor keys.
TEST_F(GgufConfig, Phi3LongRopeComesFromItsTensorsAndKeys) {
  auto write = [&](const std::string& name, bool with_long, int64_t factors) {
    const std::string file = path(name);
    GgufWriter w(file);
    w.add_string("general.architecture", "phi3");
    w.add_u32("phi3.context_length", 256);
    w.add_u32("phi3.embedding_length", 64);
    w.add_u32("phi3.feed_forward_length", 96);
    w.add_u32("phi3.block_count", 2);
    w.add_u32("phi3.attention.head_count", 4);
    w.add_u32("phi3.attention.head_count_kv", 2);
    w.add_f32("phi3.attention.layer_norm_rms_epsilon", 1e-5f);
    w.add_u32("phi3.rope.dimension_count", 12);
    w.add_u32("phi3.rope.scaling.original_context_length", 32);
    w.add_f32("phi3.rope.scaling.attn_factor", 1.25f);
    const std::vector<float> embedding(4 * 64), short_f(static_cast<size_t>(factors), 1.5f),
        long_f(static_cast<size_t>(factors), 4.0f);
    w.add_tensor("token_embd.weight", DType::F32, {4, 64});
    w.add_tensor("rope_factors_short.weight", DType::F32, {factors});
    if (with_long) w.add_tensor("rope_factors_long.weight", DType::F32, {factors});
    w.write_tensor_data(embedding.data(), embedding.size() * sizeof(float));
    w.write_tensor_data(short_f.data(), short_f.size() * sizeof(float));
    if (with_long) w.write_tensor_data(long_f.data(), long_f.size() * sizeof(float));
    w.finish();
    return file;
  };
  const auto c = read_gguf_config(read_gguf(write("phi3.gguf", true, 6)));
  EXPECT_EQ(c.rope_dim(), 12);
  EXPECT_EQ(c.rope_style, RopeStyle::HalfSplit);  // NEOX order: llama.cpp does not permute phi3's q/k
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::LongRope);
  EXPECT_EQ(c.rope_scaling.short_factor, std::vector<double>(6, 1.5));
  EXPECT_EQ(c.rope_scaling.long_factor, std::vector<double>(6, 4.0));
  EXPECT_EQ(c.rope_scaling.original_max_position, 32);
  EXPECT_EQ(c.rope_scaling.attention_factor, 1.25);
  EXPECT_TRUE(c.long_rope(256));
  auto error = [&](const std::string& file) -> std::string {
    try {
      read_gguf_config(read_gguf(file));
    } catch (const LoadError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(write("lone.gguf", false, 6)).find("come as a pair"), std::string::npos);
  EXPECT_NE(error(write("short.gguf", true, 5)).find("longrope lists 5 factors"), std::string::npos);
}

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
