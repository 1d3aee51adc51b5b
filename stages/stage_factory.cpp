#include "stages/stage_factory.hpp"

#include "core/kv_cache.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"

#ifdef ORZO_HAVE_CUDA
#include "runtime/cuda/cuda_backend.hpp"
#endif

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace orzo {
namespace {

constexpr int64_t kDefaultKvBudget = int64_t{1} << 30;

// Enough blocks for every sequence at full context, decoding, with room for one prefill
// chunk beside them, within the byte budget; and never fewer than one full context (a smaller
// pool could not serve a long request at all): the default budget grows to it, a budget the
// user set is refused, as vLLM refuses a KV cache that cannot hold max_model_len.
int32_t auto_kv_blocks(const ModelConfig& cfg, const StageTerms& terms, const StageOptions& o) {
  const KvLayout layout = kv_layout_for(cfg, terms);
  const auto bytes_per_block = layout.planes_for(0, cfg.num_layers) *
                               static_cast<int64_t>(KvCache::bytes_per_block_plane(terms.block_size, cfg.kv_dim(), o.kv_cache_dtype));
  const int64_t decoding = blocks_for_tokens(layout.windows, terms.max_model_len, terms.block_size, 1);
  const int64_t prefilling = blocks_for_tokens(layout.windows, terms.max_model_len, terms.block_size, terms.max_rows);
  const int64_t wanted = decoding * terms.max_seqs + (prefilling - decoding);
  const int64_t budget = o.kv_budget_bytes > 0 ? o.kv_budget_bytes : kDefaultKvBudget;
  const int64_t affordable = budget / bytes_per_block;
  if (o.kv_budget_bytes > 0 && affordable <= prefilling)
    throw std::invalid_argument("KV cache memory: " + std::to_string(o.kv_budget_bytes) + " bytes hold " +
                                std::to_string(affordable) + " blocks, and one context of " +
                                std::to_string(terms.max_model_len) + " tokens needs " + std::to_string(prefilling + 1) +
                                " (" + std::to_string((prefilling + 1) * bytes_per_block) +
                                " bytes): give it more memory or the model a shorter context");
  return static_cast<int32_t>(std::max<int64_t>(std::min(wanted, affordable), prefilling + 1));
}

CpuBackend::Options cpu_options(const Model& model, const Stage& stage, const StageTerms& terms, const StageOptions& options) {
  CpuBackend::Options o;
  o.range = stage.layers;
  o.kv_blocks = terms.kv_blocks;
  o.block_size = terms.block_size;
  o.threads = options.threads;
  o.max_rows = terms.max_rows;
  o.matmul = options.matmul;
  o.max_model_len = terms.max_model_len;
  o.kv_layout = kv_layout_for(model.config(), terms);
  o.kv_dtype = options.kv_cache_dtype;
  return o;
}

#ifdef ORZO_HAVE_CUDA
int32_t ceil_div(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

cuda::CudaBackend::Options cuda_options(const Model& model, const Stage& stage, const StageTerms& terms,
                                         const StageOptions& options) {
  cuda::CudaBackend::Options o;
  o.device = stage.device_index;
  o.range = stage.layers;
  o.block_size = terms.block_size;
  o.max_rows = terms.max_rows;
  o.max_seqs = terms.max_seqs;
  o.max_model_len = terms.max_model_len;
  o.gpu_memory_utilization = options.gpu_memory_utilization;
  o.cuda_graphs = options.cuda_graphs;
  o.kv_layout = kv_layout_for(model.config(), terms);
  return o;
}

// The GPU stages are made first: what KV pool they can afford bounds the pipeline's, which
// every stage holds with the same block ids. Adjacent GPU stages pass hidden states device to
// device.
std::vector<cuda::CudaBackend*> make_cuda_stages(const std::shared_ptr<const Model>& model,
                                                 const std::vector<Stage>& stages, const StageTerms& terms,
                                                 const StageOptions& options,
                                                 std::vector<std::unique_ptr<LayerBackend>>& backends) {
  std::vector<cuda::CudaBackend*> made;
  cuda::CudaBackend* previous = nullptr;  // the stage before, when it is a GPU stage
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].device != "cuda") {
      previous = nullptr;
      continue;
    }
    auto backend = std::make_unique<cuda::CudaBackend>(model, cuda_options(*model, stages[i], terms, options));
    if (previous) backend->receive_from(*previous);
    previous = backend.get();
    made.push_back(previous);
    backends[i] = std::move(backend);
  }
  return made;
}

// The pool the GPU stages can hold, within what was asked for (0: no bound).
int32_t gpu_kv_blocks(const std::vector<cuda::CudaBackend*>& gpu_stages, const StageTerms& terms, int32_t asked) {
  const int32_t per_context = ceil_div(terms.max_model_len, terms.block_size);
  const int32_t affordable = cuda::CudaBackend::affordable_kv_blocks(gpu_stages);
  if (affordable < per_context)
    throw std::invalid_argument(gpu_stages.front()->device_name() + ": GPU memory for " + std::to_string(affordable) +
                                " KV blocks, one context of " + std::to_string(terms.max_model_len) + " tokens needs " +
                                std::to_string(per_context) +
                                ": lower --max-model-len or raise --gpu-memory-utilization");
  return asked > 0 ? std::min(asked, affordable) : affordable;
}
#endif

[[noreturn]] void no_cuda() {
  throw std::invalid_argument("placement: cuda stages need orzo built with CUDA (ORZO_CUDA=ON)");
}

}  // namespace

KvLayout kv_layout_for(const ModelConfig& cfg, const StageTerms& terms) {
  std::vector<int64_t> windows;
  for (int64_t l = 0; l < cfg.num_layers; ++l) windows.push_back(cfg.window_of(l).value_or(0));
  KvLayout hybrid = KvLayout::of(windows, terms.max_model_len);
  if (terms.kv_windows.empty() || terms.kv_windows == hybrid.windows) return hybrid;
  if (terms.kv_windows == std::vector<int32_t>{0}) return KvLayout::flat(cfg.num_layers);
  throw std::invalid_argument("the batcher plans " + std::to_string(terms.kv_windows.size()) +
                              " groups of block tables, which this model's layers at a context of " +
                              std::to_string(terms.max_model_len) + " do not form");
}

PipelineBackends make_pipeline_backends(const std::shared_ptr<const Model>& model, const std::vector<Stage>& stages,
                                        StageTerms terms, const StageOptions& options) {
  bool cpu = false, gpu = false;
  for (const auto& stage : stages) {
    cpu = cpu || stage.device == "cpu";
    gpu = gpu || stage.device == "cuda";
  }
  if (terms.kv_windows.empty()) terms.kv_windows = kv_layout_for(model->config(), terms).windows;
  const bool sized = terms.kv_blocks > 0;
  if (!sized && (cpu || !gpu)) terms.kv_blocks = auto_kv_blocks(model->config(), terms, options);
  PipelineBackends out;
  out.backends.resize(stages.size());
#ifdef ORZO_HAVE_CUDA
  const auto gpu_stages = make_cuda_stages(model, stages, terms, options, out.backends);
  if (!sized && gpu) terms.kv_blocks = gpu_kv_blocks(gpu_stages, terms, terms.kv_blocks);
  for (auto* stage : gpu_stages) stage->allocate_kv(terms.kv_blocks);
#else
  if (gpu) no_cuda();
#endif
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].device == "cpu") out.backends[i] = std::make_unique<CpuBackend>(model, cpu_options(*model, stages[i], terms, options));
  out.kv_blocks = terms.kv_blocks;
  out.kv_windows = terms.kv_windows;
  return out;
}

std::vector<PipelineBackends> make_replica_backends(const std::shared_ptr<const Model>& model,
                                                    const std::vector<std::vector<Stage>>& replicas, StageTerms terms,
                                                    StageOptions options) {
  const auto on_cpu = std::count_if(replicas.begin(), replicas.end(), [](const std::vector<Stage>& stages) {
    return std::any_of(stages.begin(), stages.end(), [](const Stage& s) { return s.device == "cpu"; });
  });
  if (options.threads == 0 && on_cpu > 1)
    options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency() / static_cast<unsigned>(on_cpu)));
  std::vector<PipelineBackends> out;
  for (const auto& stages : replicas) {
    out.push_back(make_pipeline_backends(model, stages, terms, options));
    terms.kv_blocks = out.front().kv_blocks;
    terms.kv_windows = out.front().kv_windows;
  }
  return out;
}

std::unique_ptr<LayerBackend> make_stage_backend(std::shared_ptr<const Model> model, const Stage& stage,
                                                 const StageTerms& terms, const StageOptions& options) {
  if (stage.device == "cpu") return std::make_unique<CpuBackend>(model, cpu_options(*model, stage, terms, options));
#ifdef ORZO_HAVE_CUDA
  if (stage.device == "cuda") {
    auto backend = std::make_unique<cuda::CudaBackend>(model, cuda_options(*model, stage, terms, options));
    backend->allocate_kv(terms.kv_blocks);
    return backend;
  }
#endif
  if (stage.device == "cuda") no_cuda();
  throw std::invalid_argument("a " + stage.device + " stage has no backend in this process");
}

}  // namespace orzo
