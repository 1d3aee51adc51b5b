#pragma once
// The CPU implementation of a layer range: the Llama forward pass over a flat batch of
// rows, f32 activations, weights read in their stored dtype, KV in a paged f32 or f16 cache.
#include <deque>
#include <memory>
#include <vector>

#include "core/kv_cache.hpp"
#include "core/kv_layout.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/expert_routing.hpp"
#include "kernels/cpu/matmul.hpp"
#include "runtime/layer_backend.hpp"
#include "runtime/model.hpp"
#include "runtime/packed_weights.hpp"

namespace orzo {

class CpuBackend final : public LayerBackend {
 public:
  // Under int8 batches, a step that carries a prompt takes one digit from this many rows,
  // and decode steps from the level's one_digit_from_rows (forward()).
  static constexpr int64_t kPromptOneDigitRows = 32;

  struct Options {
    LayerRange range;             // end == 0 means every layer
    int32_t kv_blocks = 256;
    int32_t block_size = kDefaultBlockSize;
    int threads = 0;              // 0: one per hardware thread
    int64_t max_rows = 512;       // scratch is sized for this many rows up front
    cpu::MatmulOptions matmul;  // how the weights meet the activations (kernels/cpu/matmul.hpp)
    int64_t max_model_len = 0;    // the longest context served (0: the model's), which picks LongRope's factors
    KvLayout kv_layout;           // which layers share a block table; no groups: one table for all
    DType kv_dtype = DType::F32;  // the cache's elements: F32 or F16 (core/kv_cache.hpp)
  };

  CpuBackend(std::shared_ptr<const Model> model, Options options);

  LayerRange range() const override { return range_; }
  bool embeds() const override { return range_.begin == 0; }
  bool produces_logits() const override { return range_.end == model_->config().num_layers; }
  int32_t kv_blocks() const override { return kv_.num_blocks(); }
  std::vector<int32_t> kv_windows() const override { return kv_layout_.windows; }
  size_t kv_bytes() const override { return kv_.bytes(); }
  DType kv_dtype() const override { return kv_.dtype(); }
  void forward(const ForwardBatch& batch, std::vector<float>& hidden, std::vector<float>& logits) override;

  // How the experts were used, summed over every MoE layer of every step so far: how often a
  // layer routed, the (row, expert) choices it made and how many distinct experts ran. Their
  // ratio is the reuse of an expert's weights: rows served per read.
  struct ExpertUse {
    int64_t routings = 0, choices = 0, experts_run = 0;
  };
  const ExpertUse& expert_use() const { return expert_use_; }

 private:
  void embed(const ForwardBatch& batch, float* x);
  void attention_block(int64_t layer, const ForwardBatch& batch, float* x);
  void ffn_block(int64_t layer, int64_t rows, float* x);
  void expert_block(int64_t layer, int64_t rows, float* x);
  void gated_ffn(const float* in, int64_t rows, const TensorView& w_gate, const TensorView& w_up,
                 const TensorView& w_down, float* out, float* gate, float* up, ThreadPool& pool);
  int64_t ffn_width() const;
  void lm_head(const ForwardBatch& batch, const float* x, std::vector<float>& logits);
  void norm_rows(const float* x, const float* weight, int64_t rows, float* out);
  // Layer l's weights as this backend multiplies them (layers_).
  const LayerWeights& layer(int64_t l) const { return layers_[static_cast<size_t>(l - range_.begin)]; }
  // x += proj_, row by row; through `norm` first where the model normalizes a block's output.
  void add_residual(float* x, int64_t rows, const float* norm);

  std::shared_ptr<const Model> model_;
  const ModelConfig& cfg_;
  LayerRange range_;
  bool long_rope_;  // LongRope's long factors (ModelConfig::long_rope)
  KvLayout kv_layout_;
  std::vector<int32_t> kv_planes_;  // per layer of the range: its plane of the cache's blocks
  KvCache kv_;
  ThreadPool pool_;
  cpu::MatmulOptions options_matmul_;  // Options::matmul
  cpu::MatmulOptions matmul_;          // this step's: options_matmul_, or two digits for a scoring step
  // The model's views of this range's weights and the LM head, each matrix that the active
  // CPU level reads packed pointing at the process's packed copy (runtime/packed_weights.hpp),
  // held in packed_.
  std::vector<LayerWeights> layers_;
  TensorView lm_head_;
  std::vector<PackedMatrix> packed_;
  // Step scratch: grown to the largest batch seen, never shrunk.
  std::vector<float> xn_, q_, k_, v_, attn_, proj_, gate_, up_;
  std::vector<float> cos_sin_, local_cos_sin_;  // RoPE angles of this step's rows (local: Gemma 3's sliding layers)
  // MoE layers: the router's logits, its choices, one expert's rows gathered, every choice's
  // answer (at its slot), and a one-thread pool per thread for experts run whole on one.
  std::vector<float> router_logits_, expert_in_, expert_out_;
  std::deque<ThreadPool> serial_pools_;
  cpu::ExpertRouting routing_;
  ExpertUse expert_use_;
};

}  // namespace orzo
