#pragma once
// The shape and numerics of a Llama-family decoder, read from an HF config.json (with
// generation_config.json) or from GGUF metadata. Everything the forward pass needs to know
// about a model that is not a tensor lives here.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/gate_activation.hpp"

namespace orzo {

struct GgufFile;

// Which rows of q/k rotate together. HF checkpoints pair element i with i + head_dim/2
// (rotate_half); llama.cpp's converter permutes Llama q/k rows so that pairs are adjacent.
enum class RopeStyle { HalfSplit, Interleaved };

struct RopeScaling {
  enum class Type { None, Linear, Llama3, LongRope };
  Type type = Type::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  // LongRope (Phi-3): each frequency is divided by its short factor, or by its long one where
  // the context exceeds original_max_position (ModelConfig::long_rope); cos and sin are
  // multiplied by attention_factor either way.
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
};

struct ModelConfig {
  // llama, mistral, mixtral, qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, smollm3, phi3
  std::string architecture;
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
  // RoPE turns only the first rotary_dim dims of each head (partial_rotary_factor, Phi-4-mini:
  // 0.75), pairing i with i + rotary_dim/2; the rest pass through. 0: all of head_dim.
  int64_t rotary_dim = 0;
  std::optional<int64_t> sliding_window;  // a token sees only the last N positions (Mistral)
  // The layers that attend through sliding_window (Gemma interleaves them with global
  // ones); empty: every layer does, when there is a window.
  std::vector<bool> sliding_layers;
  // Gemma 3's sliding layers rotate with a base of their own, unscaled; 0: as the others.
  double rope_local_theta = 0.0;
  // SmolLM3 leaves RoPE out of some layers (every fourth): those attend without positions.
  // Empty: every layer rotates.
  std::vector<bool> no_rope_layers;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2, and Llama's attention_bias (which adds an o_proj bias too)
  bool o_bias = false;
  bool qk_norm = false;   // Qwen3, Gemma 3: RMSNorm over each q/k head before RoPE
  GateActivation activation = GateActivation::silu;
  // Gemma: the embedding rows are multiplied by sqrt(hidden_size) on the way in.
  double embed_scale = 1.0;
  // Gemma 2/3 normalize each block's output too (post-attention and post-FFN norms)
  // before adding it to the residual stream.
  bool sandwich_norms = false;
  // What HF Gemma checkpoints store in a norm is w for a scale of (1 + w); llama.cpp's
  // converter stores 1 + w. Added to every norm weight at load.
  double norm_weight_offset = 0.0;
  // Scores are q·k times this; 0: 1/sqrt(head_dim). Gemma: query_pre_attn_scalar^-1/2.
  double attn_scale = 0.0;
  // Gemma 2 bounds attention scores and final logits smoothly: x -> cap * tanh(x / cap).
  std::optional<double> attn_softcap, final_softcap;
  // Mixture of Experts: a router scores num_experts FFNs (of expert_intermediate_size) for
  // each row, softmax over all of them, and the row goes through the experts_per_token best,
  // weighted by their probabilities (renormalized to sum to 1 where norm_topk_prob: Mixtral,
  // Qwen3-MoE). 0 experts: a dense model.
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t expert_intermediate_size = 0;
  bool norm_topk_prob = false;
  // Qwen2-MoE adds a dense expert every row takes, scaled by sigmoid(w · x); 0: none.
  int64_t shared_expert_intermediate_size = 0;
  // Layers of a MoE model with a dense FFN of intermediate_size instead (Qwen's
  // mlp_only_layers and decoder_sparse_step); empty: none.
  std::vector<bool> dense_layers;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // The window layer `l` attends through, if any.
  std::optional<int64_t> window_of(int64_t l) const {
    if (!sliding_window || (!sliding_layers.empty() && !sliding_layers[static_cast<size_t>(l)])) return std::nullopt;
    return sliding_window;
  }
  bool local_rope(int64_t l) const { return rope_local_theta > 0 && window_of(l).has_value(); }
  bool has_experts(int64_t l) const {
    return num_experts > 0 && (dense_layers.empty() || !dense_layers[static_cast<size_t>(l)]);
  }
  bool rotates(int64_t l) const { return no_rope_layers.empty() || !no_rope_layers[static_cast<size_t>(l)]; }
  int64_t rope_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // Whether a backend serving contexts of up to `context` tokens rotates with LongRope's long
  // factors: for every position, once the context exceeds the original one (docs/DESIGN.md).
  bool long_rope(int64_t context) const {
    return rope_scaling.type == RopeScaling::Type::LongRope && context > rope_scaling.original_max_position;
  }
  double attention_scale() const { return attn_scale > 0 ? attn_scale : 1.0 / std::sqrt(static_cast<double>(head_dim)); }
  // Throws LoadError (naming `source`) when the numbers do not describe a usable model.
  void validate(const std::string& source) const;
};

// `dir` holds config.json and optionally generation_config.json.
ModelConfig read_hf_config(const std::string& dir);
ModelConfig parse_hf_config(const std::string& config_json, const std::string& generation_config_json,
                            const std::string& source);
ModelConfig read_gguf_config(const GgufFile& file);

// What llama.cpp's loader fixes for Gemma GGUFs, which their keys do not say: norms stored as
// 1 + w, GeGLU, the scaled embedding, which layers slide (Gemma 2: even ones; Gemma 3: all
// but every sixth, at a local RoPE base of 10000), and query_pre_attn_scalar = head_dim except
// in the 27B models (46 and 62 layers: hidden / heads). Applied to `c` of architecture
// gemma2 or gemma3.
void apply_gguf_gemma_rules(ModelConfig& c);

// LongRope's attention factor where the config gives none (transformers, llama.cpp's converter):
// 1 for a factor up to 1, sqrt(1 + ln factor / ln original_max_position) past it.
double longrope_attention_factor(double factor, int64_t original_max_position);

// RoPE inverse frequencies, rope_dim() / 2 of them, with the configured scaling applied
// exactly as transformers computes them; `local`: those of Gemma 3's sliding layers;
// `long_factors`: LongRope's long factors instead of its short ones.
std::vector<float> rope_inv_freq(const ModelConfig& config, bool local = false, bool long_factors = false);

}  // namespace orzo
