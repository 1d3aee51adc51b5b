#pragma once
// A layer range on one NVIDIA GPU: the forward pass of CpuBackend with the weights,
// the paged KV cache and every activation in device memory. Weights are uploaded once in
// the stage's storage type (bf16, or f16 for an f16 checkpoint); scratch and step inputs are
// allocated once at start for the largest step the scheduler makes; projections are cuBLAS
// GEMMs over all rows of the step; decode steps replay CUDA graphs (decode_graphs.hpp), but
// in a range with Mixture-of-Experts layers, whose expert GEMMs are sized by the routing the
// host reads back each layer. The last range can sample on the device, so only token ids leave it.
//
// Start-up is in two parts, because the KV pool's size is the pipeline's to choose (every
// stage holds the same block ids): construct every stage (weights, scratch), ask
// affordable_kv_blocks of them all, then allocate_kv with the pipeline's choice.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "core/kv_cache.hpp"
#include "core/kv_layout.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/sampling.hpp"
#include "runtime/cuda/decode_graphs.hpp"
#include "runtime/cuda/device_arena.hpp"
#include "runtime/cuda/device_weights.hpp"
#include "runtime/cuda/draw_packing.hpp"
#include "runtime/cuda/staged_upload.hpp"
#include "runtime/layer_backend.hpp"
#include "runtime/model.hpp"

namespace orzo::cuda {

class CudaBackend final : public LayerBackend {
 public:
  struct Options {
    int device = 0;
    LayerRange range;                    // end == 0 means every layer
    int32_t block_size = kDefaultBlockSize;
    int32_t max_rows = 512;              // rows in a step (the scheduler's max_num_batched_tokens)
    int32_t max_seqs = 256;              // sequences in a step (max_num_seqs)
    int32_t max_model_len = 4096;        // tokens of the longest sequence
    double gpu_memory_utilization = 0.9; // the share of the device all that is on it may fill (vLLM's)
    bool cuda_graphs = true;             // false: every step runs eagerly (vLLM's --enforce-eager)
    KvLayout kv_layout;                  // which layers share a block table; no groups: one table for all
  };

  // Throws CudaError naming the device when it is missing or the weights and scratch do not fit.
  CudaBackend(std::shared_ptr<const Model> model, Options options);
  ~CudaBackend() override;

  // KV blocks each of `stages` can hold: what gpu_memory_utilization leaves of each device
  // after the weights and scratch of every stage on it, shared among those stages in
  // proportion to their layers; the least over the devices.
  static int32_t affordable_kv_blocks(const std::vector<CudaBackend*>& stages);
  // Allocates the KV pool (once, before the first step); throws CudaError when it does not fit.
  void allocate_kv(int32_t blocks);
  // Takes this stage's input hidden state from `previous` (the stage before, in this process)
  // device to device, peer to peer where the GPUs allow it, instead of through the step message.
  void receive_from(CudaBackend& previous);

  const std::string& device_name() const { return name_; }
  size_t kv_bytes_per_block() const;
  Elem storage() const { return weights_->elem(); }
  size_t weight_bytes() const { return weights_->bytes(); }
  size_t captured_graphs() const { return graphs_.size(); }
  // Whether decode steps may replay graphs: not where a layer of the range has experts.
  bool graphs_enabled() const { return o_.cuda_graphs && !has_experts_; }
  const std::string& graph_failure() const { return graphs_.failure(); }

  LayerRange range() const override { return range_; }
  bool embeds() const override { return range_.begin == 0; }
  bool produces_logits() const override { return range_.end == cfg_.num_layers; }
  int32_t kv_blocks() const override { return kv_blocks_; }
  std::vector<int32_t> kv_windows() const override { return kv_layout_.windows; }
  size_t kv_bytes() const override { return static_cast<size_t>(kv_blocks_) * kv_bytes_per_block(); }
  DType kv_dtype() const override { return storage() == Elem::bf16 ? DType::BF16 : DType::F16; }
  void forward(const ForwardBatch& batch, std::vector<float>& hidden, std::vector<float>& logits) override;
  bool samples() const override { return produces_logits(); }
  void forward_and_sample(const ForwardBatch& batch, std::vector<float>& hidden, const std::vector<DrawPlan>& plans,
                          std::vector<SampleResult>& out) override;

 private:
  // Where one step's inputs sit on the device, and its shape.
  struct Step {
    int32_t rows = 0;        // padded up to the graph's batch size on the graph path
    int32_t logit_rows = 0;
    int32_t table_stride = 0;
    int32_t group_tables = 0;  // tables per group of block tables: group g's start at g * group_tables
    int32_t splits = 0;      // > 0: every row is a decode row (split-K attention); 0: prefill tiles
    int32_t tiles = 0;
    const int32_t* tokens = nullptr;
    const int32_t* positions = nullptr;
    const int32_t* seq_of_row = nullptr;
    const int32_t* slots = nullptr;  // per group of block tables, rows apart
    const int32_t* logit_index = nullptr;
    const int32_t* tables = nullptr;
    const AttentionTile* tile_list = nullptr;
  };

  void layout_scratch(DeviceArena& arena);
  void run(const ForwardBatch& batch, std::vector<float>& hidden);
  bool decodes_only(const ForwardBatch& batch) const;
  // Lays the step's inputs out and uploads them. A graph's step pads to padded_rows and to a
  // table stride that depends only on the longest table's size class.
  Step stage_inputs(const ForwardBatch& batch, int32_t padded_rows, bool decode, bool graph);
  void enqueue_forward(const Step& step);
  void attend(int64_t layer, const Step& step);
  void dense_ffn(const DeviceLayer& w, int32_t rows);
  void expert_ffn(const DeviceLayer& w, int32_t rows);
  void add_projection(const void* in, int32_t in_dim, const void* w, const float* bias, const float* post_norm,
                      int32_t rows);
  void synchronize() const;

  std::shared_ptr<const Model> model_;
  const ModelConfig& cfg_;
  Options o_;
  LayerRange range_;
  std::string name_;
  int sm_count_ = 0;
  int32_t max_table_ = 0;      // block ids per sequence at max_model_len
  KvLayout kv_layout_;
  std::vector<int32_t> kv_planes_;  // per layer of the range: its plane of the cache's blocks
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<DeviceWeights> weights_;

  DeviceArena scratch_;
  float* x_ = nullptr;          // [max_rows, hidden] the residual stream
  void* xn_ = nullptr;          // [max(max_rows, logit rows), hidden] normalized, GEMM input
  float* qkv_ = nullptr;        // [max_rows, q_dim + 2 kv_dim]
  float* q_ = nullptr;          // [max_rows, q_dim] rotated
  void* attn_ = nullptr;        // [max_rows, q_dim]
  float* gate_up_ = nullptr;    // [max_rows, 2 inter]
  void* act_ = nullptr;         // [max_rows, inter]
  float* proj_ = nullptr;       // [max_rows, hidden] a block's output before its norm (sandwich norms only)
  // MoE layers (has_experts_), for max_rows x top_k choices: the router's logits (+ the shared
  // gate's), the routing (expert_routing.hpp), each choice's input and output in grouped order,
  // and the shared expert's output. gate_up_ and act_ above hold the grouped choices too.
  bool has_experts_ = false;
  float* router_logits_ = nullptr;   // [max_rows, experts + 1]
  int32_t* choice_ = nullptr;        // [max_rows, top_k]
  float* choice_weight_ = nullptr;   // [max_rows, top_k]
  int32_t* expert_begin_ = nullptr;  // [experts + 1]
  int32_t* grouped_row_ = nullptr;   // [max_rows * top_k]
  int32_t* row_slot_ = nullptr;      // [max_rows, top_k]
  float* row_weight_ = nullptr;      // [max_rows, top_k]
  void* expert_in_ = nullptr;        // [max_rows * top_k, hidden]
  float* expert_out_ = nullptr;      // [max_rows * top_k, hidden]
  float* shared_out_ = nullptr;      // [max_rows, hidden] (a shared expert only)
  int32_t* host_begin_ = nullptr;    // pinned copy of expert_begin_
  float* logits_ = nullptr;     // [logit rows, vocab]
  void* gemm_ws_ = nullptr;
  void* attention_ws_ = nullptr;
  void* sampling_ws_ = nullptr;
  DeviceSample* samples_ = nullptr;
  std::unique_ptr<Gemm> gemm_;

  std::unique_ptr<StagedUpload> inputs_;    // per step, fixed layout for the graphs
  std::unique_ptr<StagedUpload> draws_in_;  // per step, for sampling
  DeviceSample* host_samples_ = nullptr;    // pinned
  PackedDraws packed_;

  DeviceArena kv_;
  void* k_cache_ = nullptr;     // [layers, blocks * block_size, kv_dim]
  void* v_cache_ = nullptr;
  int32_t kv_blocks_ = 0;

  DecodeGraphs graphs_;
  CudaBackend* previous_ = nullptr;  // input hidden state straight from its device
  bool next_on_device_ = false;      // output stays on the device for the next stage
};

}  // namespace orzo::cuda
