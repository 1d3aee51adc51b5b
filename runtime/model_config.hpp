#pragma once
// The shape and numerics of a Llama-family decoder, read from an HF config.json (with
// generation_config.json) or from GGUF metadata. Everything the forward pass needs to know
// about a model that is not a tensor lives here.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace orzo {

struct GgufFile;

// Which rows of q/k rotate together. HF checkpoints pair element i with i + head_dim/2
// (rotate_half); llama.cpp's converter permutes Llama q/k rows so that pairs are adjacent.
enum class RopeStyle { HalfSplit, Interleaved };

struct RopeScaling {
  enum class Type { None, Linear, Llama3 };
  Type type = Type::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

struct ModelConfig {
  std::string architecture;  // llama, mistral, qwen2, qwen3
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  RopeStyle rope_style = RopeStyle::HalfSplit;
  std::optional<int64_t> sliding_window;  // a token sees only the last N positions (Mistral)
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2, and Llama's attention_bias (which adds an o_proj bias too)
  bool o_bias = false;
  bool qk_norm = false;   // Qwen3: RMSNorm over each q/k head before RoPE
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // Throws LoadError (naming `source`) when the numbers do not describe a usable model.
  void validate(const std::string& source) const;
};

// `dir` holds config.json and optionally generation_config.json.
ModelConfig read_hf_config(const std::string& dir);
ModelConfig parse_hf_config(const std::string& config_json, const std::string& generation_config_json,
                            const std::string& source);
ModelConfig read_gguf_config(const GgufFile& file);

// RoPE inverse frequencies, head_dim / 2 of them, with the configured scaling applied
// exactly as transformers computes them.
std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace orzo
