#pragma once
// Builds the backend of each stage of a placement (CpuBackend, CudaBackend) and sizes the KV
// pool that every stage of the pipeline holds with the same block ids. The actors spawn a
// worker around each backend; this file knows nothing of them.
#include "core/dtype.hpp"
#include "core/kv_layout.hpp"
#include "core/stage_terms.hpp"
#include "kernels/cpu/matmul_options.hpp"
#include "runtime/layer_backend.hpp"
#include "stages/placement.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace orzo {

class Model;
struct ModelConfig;

// The knobs of a stage's backend that neither the placement nor the batcher's terms say.
struct StageOptions {
  int threads = 0;                              // CPU threads per CPU stage; 0: all hardware threads
  // Host memory for the KV of a replica's CPU stages. 0: 1 GiB, or one full context where that
  // takes more; a budget the caller gave that cannot hold one full context is refused instead.
  int64_t kv_budget_bytes = 0;
  double gpu_memory_utilization = 0.9;          // the share of each GPU a CUDA stage may fill (KV included)
  bool cuda_graphs = true;                      // false: CUDA stages run every step eagerly
  // CPU stages' arithmetic (kernels/cpu/matmul.hpp). The product's defaults: bf16
  // activations for BF16 weights, as PyTorch runs bf16, and int8 batches, llama.cpp's
  // precision for prompts.
  cpu::MatmulOptions matmul{/*int8_activations=*/false, /*bf16_activations=*/true, /*batch_invariant=*/false,
                            /*int8_batches=*/true};
  DType kv_cache_dtype = DType::F32;            // CPU stages: the KV cache's elements, F32 or F16 (core/kv_cache.hpp)
};

struct PipelineBackends {
  std::vector<std::unique_ptr<LayerBackend>> backends;  // one per stage, null for remote stages
  int32_t kv_blocks = 0;                                 // the pool every stage holds
  std::vector<int32_t> kv_windows;                       // the groups of block tables they keep
};

// The KV layout a stage keeps under `terms`: with terms.kv_windows empty, sliding layers
// apart where that saves memory (core/kv_layout.hpp's KvLayout::of); else the one those
// windows name, which must be this model's hybrid layout or the flat one
// (std::invalid_argument otherwise: a batcher planning for another model or context).
KvLayout kv_layout_for(const ModelConfig& cfg, const StageTerms& terms);

// A backend for every local stage of `stages`, built to `terms`. terms.kv_blocks <= 0 sizes the
// pool: enough for max_seqs full contexts within kv_budget_bytes on the CPU, what the devices
// afford on GPUs, the least of the two when both serve. Empty terms.kv_windows picks the KV
// layout (kv_layout_for). Throws std::invalid_argument (CUDA
// stages without CUDA, a GPU that cannot hold one context) or a CUDA error naming the device.
PipelineBackends make_pipeline_backends(const std::shared_ptr<const Model>& model, const std::vector<Stage>& stages,
                                        StageTerms terms, const StageOptions& options);

// The backends of data-parallel replicas (stages/placement.hpp's parse_replicas), each built as
// make_pipeline_backends builds one. The first replica sizes the KV pool and the others hold
// the same (the batcher plans every replica with one size); with options.threads 0, local CPU
// replicas, which compute at once, share the hardware threads evenly.
std::vector<PipelineBackends> make_replica_backends(const std::shared_ptr<const Model>& model,
                                                    const std::vector<std::vector<Stage>>& replicas, StageTerms terms,
                                                    StageOptions options);

// One stage's backend, built to a batcher's terms (its KV pool allocated): what `orzo worker`
// runs when it joins. Throws as make_pipeline_backends does.
std::unique_ptr<LayerBackend> make_stage_backend(std::shared_ptr<const Model> model, const Stage& stage,
                                                 const StageTerms& terms, const StageOptions& options);

}  // namespace orzo
