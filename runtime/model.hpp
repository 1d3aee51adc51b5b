#pragma once
// A loaded model: its configuration and views of every weight, kept in the mapped files.
// Built from an HF directory (config.json + safetensors) or a GGUF file; tensor names,
// shapes and dtypes are checked here once so the forward pass can trust them.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "runtime/model_config.hpp"

namespace orzo {

class MappedFile;
struct QuantTarget;

// A Mixture-of-Experts FFN (ModelConfig::has_experts): the router and each expert's SwiGLU.
struct ExpertWeights {
  TensorView router;                       // [experts, hidden]
  std::vector<TensorView> gate, up, down;  // per expert: [expert_inter, hidden] x2, [hidden, expert_inter]
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // [hidden]
  TensorView wq, wk, wv, wo;         // [q_dim, hidden], [kv_dim, hidden] x2, [hidden, q_dim]
  const float* bq = nullptr;         // biases: null when the architecture has none
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* bo = nullptr;
  const float* q_norm = nullptr;     // [head_dim], Qwen3 only
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;   // [hidden]
  // The dense FFN, [inter, hidden] x2, [hidden, inter]; in a MoE layer Qwen2-MoE's shared
  // expert, or nothing.
  TensorView w_gate, w_up, w_down;
  const float* post_attn_norm = nullptr;  // [hidden], on each block's output: Gemma only
  const float* post_ffn_norm = nullptr;
  ExpertWeights experts;                  // empty in a dense layer
  const float* shared_expert_gate = nullptr;  // [hidden]: the shared expert is scaled by sigmoid(this · x)
};

class Model {
 public:
  // `path` is an HF model directory or a .gguf file. Throws LoadError.
  static std::shared_ptr<const Model> load(const std::string& path);
  // The same with every matrix re-encoded as `quantize` (a name orzo quantize takes: q8_0,
  // Q4_K_M, ...) chooses for it, held in memory the model owns; empty: as stored. The types
  // are those `orzo quantize` writes, so the model equals the one loaded from its output.
  // Throws std::invalid_argument for an unknown target or a matrix it cannot store.
  static std::shared_ptr<const Model> load(const std::string& path, const std::string& quantize);

  const ModelConfig& config() const { return config_; }
  const std::string& source() const { return source_; }
  const TensorView& embedding() const { return embedding_; }  // [vocab, hidden]
  const TensorView& lm_head() const { return lm_head_; }      // [vocab, hidden]; the embedding when tied
  const float* final_norm() const { return final_norm_; }
  const LayerWeights& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }
  // RoPE inverse frequencies; `local`: those of Gemma 3's sliding layers (ModelConfig::local_rope);
  // `long_factors`: LongRope's long ones (ModelConfig::long_rope).
  const std::vector<float>& rope_inv_freq(bool local = false, bool long_factors = false) const {
    return local ? local_rope_inv_freq_ : long_factors ? long_rope_inv_freq_ : rope_inv_freq_;
  }
  // Every layer's matrices, layer by layer: attention's four, then the FFN's three, or a MoE
  // layer's router, shared expert and every expert's three.
  std::vector<const TensorView*> layer_matrices() const;
  // The same of one layer.
  std::vector<const TensorView*> layer_matrices(int64_t layer) const;
  // The matrices one token multiplies: those of layer_matrices() less the experts it is not
  // routed to (experts_per_token of them stand for any, all being stored alike).
  std::vector<const TensorView*> token_matrices() const;
  // Bytes of weights one decode step of one sequence reads: token_matrices() once, one
  // embedding row and the LM head.
  size_t weight_bytes_per_token() const;
  // Weights of token_matrices(): every token costs 2 flops for each. (The LM head adds
  // 2 x vocab x hidden for each row that produces logits.)
  int64_t layer_parameters() const;
  // Reads every weight once so the mapped pages are resident before the first request needs
  // them, reporting bytes done after each tensor.
  void page_in(const std::function<void(size_t done, size_t total)>& progress) const;

 private:
  class Builder;
  Model() = default;
  // Re-encodes every matrix as `target` chooses, into owned_matrices_.
  void requantize(const QuantTarget& target);

  ModelConfig config_;
  std::string source_;
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<std::vector<float>> small_tensors_;  // norms and biases, converted to f32 once
  std::vector<std::vector<uint8_t>> owned_matrices_;  // matrices re-encoded at load (--quantize)
  TensorView embedding_, lm_head_;
  const float* final_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<float> rope_inv_freq_, local_rope_inv_freq_;
  std::vector<float> long_rope_inv_freq_;  // LongRope's long factors (rope_inv_freq_ has the short ones)
};

}  // namespace orzo
