#pragma once
// A GPU stage's weights, uploaded once at start in the stage's storage type. The layout is
// made for the step: q, k and v are one [q_dim + 2 kv_dim, hidden] matrix and gate and up
// one [2 inter, hidden] matrix, so that each is a single GEMM; their biases are concatenated
// the same way. A Mixture-of-Experts layer has each expert's gate|up and down so too, and its
// router with Qwen2-MoE's shared-expert gate as one more row. Norm weights, biases and RoPE
// frequencies stay f32.
#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/cuda/elem.hpp"
#include "runtime/cuda/device_arena.hpp"
#include "runtime/layer_backend.hpp"
#include "runtime/model.hpp"

namespace orzo::cuda {

struct DeviceLayer {
  const float* attn_norm = nullptr;  // [hidden]
  const void* qkv = nullptr;         // [q_dim + 2 kv_dim, hidden]
  const float* qkv_bias = nullptr;   // [q_dim + 2 kv_dim] or null
  const void* o = nullptr;           // [hidden, q_dim]
  const float* o_bias = nullptr;     // [hidden] or null
  const float* q_norm = nullptr;     // [head_dim] or null (Qwen3)
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;   // [hidden]
  // The dense FFN, or in a MoE layer Qwen2-MoE's shared expert (of its own width), or null.
  const void* gate_up = nullptr;     // [2 inter, hidden]
  const void* down = nullptr;        // [hidden, inter]
  // A MoE layer (ModelConfig::has_experts): the router's [experts, hidden], with the shared
  // expert's gate vector as row `experts` where there is one; each expert's matrices.
  const void* router = nullptr;
  std::vector<const void*> expert_gate_up;  // per expert: [2 expert_inter, hidden]
  std::vector<const void*> expert_down;     // per expert: [hidden, expert_inter]
  const float* post_attn_norm = nullptr;  // [hidden] or null: each block's output norm (Gemma)
  const float* post_ffn_norm = nullptr;
};

class DeviceWeights {
 public:
  // bf16 unless every matrix the range reads is stored as f16.
  static Elem storage_for(const Model& model, LayerRange range, bool embeds, bool lm_head);

  // Uploads to `device` (current); throws CudaError naming the device and the bytes wanted
  // when they do not fit.
  DeviceWeights(const Model& model, LayerRange range, bool embeds, bool lm_head, int device);

  Elem elem() const { return elem_; }
  size_t bytes() const { return arena_.used(); }
  const DeviceLayer& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }  // from the range's first
  const void* embedding() const { return embedding_; }   // [vocab, hidden], first stage only
  const float* final_norm() const { return final_norm_; }  // last stage only
  const void* lm_head() const { return lm_head_; }       // [vocab, hidden], last stage only
  // [rotary dims / 2]; `local`: those of Gemma 3's sliding layers (ModelConfig::local_rope);
  // `long_factors`: LongRope's long ones (ModelConfig::long_rope).
  const float* inv_freq(bool local, bool long_factors = false) const {
    return local ? local_inv_freq_ : long_factors ? long_inv_freq_ : inv_freq_;
  }

 private:
  // Lays the weights out in `arena`, copying them when it is real.
  void place(DeviceArena& arena, const Model& model, LayerRange range, bool embeds, bool lm_head);

  Elem elem_;
  DeviceArena arena_;
  std::vector<DeviceLayer> layers_;
  const void* embedding_ = nullptr;
  const float* final_norm_ = nullptr;
  const void* lm_head_ = nullptr;
  const float* inv_freq_ = nullptr;
  const float* local_inv_freq_ = nullptr;
  const float* long_inv_freq_ = nullptr;
};

}  // namespace orzo::cuda
