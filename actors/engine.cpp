#include "actors/engine.hpp"

#include "actors/worker.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/engine/placement.hpp"
#include "runtime/model.hpp"
#include "runtime/text/tokenizer.hpp"

#include <caf/all.hpp>

#ifdef ORZO_HAVE_CUDA
#include "runtime/cuda/cuda_backend.hpp"
#endif

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace orzo {
namespace {

int32_t ceil_div(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

// Enough blocks for every sequence at full context, within the byte budget, and never fewer
// than one full context (a smaller pool could not serve a long request at all).
int32_t auto_kv_blocks(const ModelConfig& cfg, const EngineOptions& o, int32_t max_model_len) {
  const int64_t bytes_per_block = 2 * cfg.num_layers * cfg.kv_dim() * int64_t{sizeof(float)} * o.block_size;
  const int32_t per_context = ceil_div(max_model_len, o.block_size);
  const int64_t wanted = int64_t{per_context} * o.scheduler.max_num_seqs;
  const int64_t affordable = o.kv_budget_bytes / bytes_per_block;
  return static_cast<int32_t>(std::max<int64_t>(std::min(wanted, affordable), per_context + 1));
}

// One step is in flight at a time, so at most one stage computes at once and blocks one
// scheduler thread. Automatic sharing waits for two more, one for the batcher, one for the
// sessions; even when asked for, sharing the only scheduler thread would stall the batcher.
// A GPU stage waits on its device for most of a step: it always gets a thread of its own.
WorkerThread resolve(WorkerThread choice, caf::actor_system& sys, const std::string& device) {
  if (device.rfind("cuda", 0) == 0) return WorkerThread::own;
  const auto threads = sys.scheduler().num_workers();
  if (choice == WorkerThread::automatic) return threads >= 3 ? WorkerThread::scheduler : WorkerThread::own;
  return choice == WorkerThread::scheduler && threads < 2 ? WorkerThread::own : choice;
}

// Spawns a worker for every stage that has a backend, each chained to the next stage's worker
// when that one is local too. A stage without a backend waits for a worker to join.
std::vector<PipelineStage> spawn_pipeline(caf::actor_system& sys, std::vector<std::unique_ptr<LayerBackend>> backends,
                                          const std::vector<LayerRange>& layers, const std::vector<std::string>& devices,
                                          WorkerThread choice) {
  std::vector<PipelineStage> stages(backends.size());
  worker_actor next;
  for (size_t i = backends.size(); i-- > 0;) {
    stages[i].layers = layers[i];
    if (backends[i])
      stages[i].worker = spawn_worker(sys, std::move(backends[i]), devices[i], next, resolve(choice, sys, devices[i]));
    next = stages[i].worker;
  }
  return stages;
}

// A stage's backend options: its layers and device, sized to what the pipeline's steps hold.
CpuBackend::Options cpu_options(const Stage& stage, const StageTerms& terms, const EngineOptions& options) {
  CpuBackend::Options o;
  o.range = stage.layers;
  o.kv_blocks = terms.kv_blocks;
  o.block_size = terms.block_size;
  o.threads = options.threads;
  o.max_rows = terms.max_rows;
  return o;
}

#ifdef ORZO_HAVE_CUDA
cuda::CudaBackend::Options cuda_options(const Stage& stage, const StageTerms& terms, const EngineOptions& options) {
  cuda::CudaBackend::Options o;
  o.device = stage.device_index;
  o.range = stage.layers;
  o.block_size = terms.block_size;
  o.max_rows = terms.max_rows;
  o.max_seqs = terms.max_seqs;
  o.max_model_len = terms.max_model_len;
  o.gpu_memory_utilization = options.gpu_memory_utilization;
  o.cuda_graphs = options.cuda_graphs;
  return o;
}

// The GPU stages are made first: what KV pool they can afford bounds the pipeline's, which
// every stage holds with the same block ids. Adjacent GPU stages pass hidden states device to
// device.
std::vector<cuda::CudaBackend*> make_cuda_stages(const std::shared_ptr<const Model>& model,
                                                 const std::vector<Stage>& stages, const StageTerms& terms,
                                                 const EngineOptions& options,
                                                 std::vector<std::unique_ptr<LayerBackend>>& backends) {
  std::vector<cuda::CudaBackend*> made;
  cuda::CudaBackend* previous = nullptr;  // the stage before, when it is a GPU stage
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].device != "cuda") {
      previous = nullptr;
      continue;
    }
    auto backend = std::make_unique<cuda::CudaBackend>(model, cuda_options(stages[i], terms, options));
    if (previous) backend->receive_from(*previous);
    previous = backend.get();
    made.push_back(previous);
    backends[i] = std::move(backend);
  }
  return made;
}
#endif

[[noreturn]] void no_cuda() {
  throw std::invalid_argument("placement: cuda stages need orzo built with CUDA (ORZO_CUDA=ON)");
}

// Fills `backends` (null for remote stages) and returns the KV pool's size in blocks.
int32_t make_backends(const std::shared_ptr<const Model>& model, const std::vector<Stage>& stages,
                      const EngineOptions& options, const BatcherOptions& b,
                      std::vector<std::unique_ptr<LayerBackend>>& backends) {
  const auto& cfg = model->config();
  bool cpu = false, gpu = false;
  for (const auto& stage : stages) {
    cpu = cpu || stage.device == "cpu";
    gpu = gpu || stage.device == "cuda";
  }
  StageTerms terms{options.kv_blocks, b.block_size, b.scheduler.max_num_batched_tokens, b.scheduler.max_num_seqs,
                   b.max_model_len};
  if (terms.kv_blocks <= 0 && (cpu || !gpu)) terms.kv_blocks = auto_kv_blocks(cfg, options, b.max_model_len);
#ifdef ORZO_HAVE_CUDA
  const auto gpu_stages = make_cuda_stages(model, stages, terms, options, backends);
  if (options.kv_blocks <= 0 && gpu) {
    const int32_t per_context = ceil_div(b.max_model_len, b.block_size);
    const int32_t affordable = cuda::CudaBackend::affordable_kv_blocks(gpu_stages);
    if (affordable < per_context)
      throw std::invalid_argument(gpu_stages.front()->device_name() + ": GPU memory for " + std::to_string(affordable) +
                                  " KV blocks, one context of " + std::to_string(b.max_model_len) + " tokens needs " +
                                  std::to_string(per_context) +
                                  ": lower --max-model-len or raise --gpu-memory-utilization");
    terms.kv_blocks = terms.kv_blocks > 0 ? std::min(terms.kv_blocks, affordable) : affordable;
  }
  for (auto* stage : gpu_stages) stage->allocate_kv(terms.kv_blocks);
#else
  if (gpu) no_cuda();
#endif
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].device == "cpu") backends[i] = std::make_unique<CpuBackend>(model, cpu_options(stages[i], terms, options));
  return terms.kv_blocks;
}

std::vector<worker_actor> local_workers(const std::vector<PipelineStage>& stages) {
  std::vector<worker_actor> workers;
  for (const auto& stage : stages)
    if (stage.worker) workers.push_back(stage.worker);
  return workers;
}

}  // namespace

std::unique_ptr<LayerBackend> make_stage_backend(std::shared_ptr<const Model> model, const Stage& stage,
                                                 const StageTerms& terms, const EngineOptions& options) {
  if (stage.device == "cpu") return std::make_unique<CpuBackend>(std::move(model), cpu_options(stage, terms, options));
#ifdef ORZO_HAVE_CUDA
  if (stage.device == "cuda") {
    auto backend = std::make_unique<cuda::CudaBackend>(std::move(model), cuda_options(stage, terms, options));
    backend->allocate_kv(terms.kv_blocks);
    return backend;
  }
#endif
  if (stage.device == "cuda") no_cuda();
  throw std::invalid_argument("a " + stage.device + " stage has no backend in this process");
}

std::unique_ptr<Engine> Engine::start(caf::actor_system& sys, const EngineOptions& options) {
  std::unique_ptr<Engine> engine(new Engine(sys));
  engine->model_ = Model::load(options.model);
  if (options.on_load_progress) engine->model_->page_in(options.on_load_progress);
  if (options.load_tokenizer)
    engine->tokenizer_ = std::make_shared<const Tokenizer>(Tokenizer::for_model(options.model));
  const auto& cfg = engine->model_->config();
  const auto stages = parse_placement(options.placement, static_cast<int32_t>(cfg.num_layers));

  BatcherOptions b;
  b.scheduler = options.scheduler;
  b.block_size = options.block_size;
  b.prefix_caching = options.prefix_caching;
  b.max_model_len = options.max_model_len > 0 ? options.max_model_len : static_cast<int32_t>(cfg.max_position);
  b.vocab_size = static_cast<int32_t>(cfg.vocab_size);
  b.eos_token_ids = cfg.eos_token_ids;
  if (engine->tokenizer_)
    for (auto id : engine->tokenizer_->eos_ids())
      if (std::find(b.eos_token_ids.begin(), b.eos_token_ids.end(), id) == b.eos_token_ids.end())
        b.eos_token_ids.push_back(id);
  b.step_timeout = options.step_timeout;

  std::vector<std::unique_ptr<LayerBackend>> backends;
  std::vector<LayerRange> layers;
  std::vector<std::string> devices;
  for (const auto& stage : stages) {
    layers.push_back(stage.layers);
    devices.push_back(stage.device == "remote" ? "remote"
                                               : stage.device + ":" + std::to_string(stage.device_index) + " layers " +
                                                     std::to_string(stage.layers.begin) + "-" +
                                                     std::to_string(stage.layers.end));
  }
  backends.resize(stages.size());
  b.kv_blocks = make_backends(engine->model_, stages, options, b, backends);
  auto pipeline = spawn_pipeline(sys, std::move(backends), layers, devices, options.worker_thread);
  engine->workers_ = local_workers(pipeline);
  engine->max_model_len_ = b.max_model_len;
  engine->batcher_ = spawn_batcher(sys, std::move(b), std::move(pipeline));
  return engine;
}

std::unique_ptr<Engine> Engine::start_with(caf::actor_system& sys, std::vector<std::unique_ptr<LayerBackend>> stages,
                                           BatcherOptions options, WorkerThread worker_thread) {
  std::unique_ptr<Engine> engine(new Engine(sys));
  std::vector<std::string> devices;
  std::vector<LayerRange> layers;
  for (size_t i = 0; i < stages.size(); ++i) {
    devices.push_back("stage " + std::to_string(i));
    layers.push_back(stages[i]->range());
  }
  auto pipeline = spawn_pipeline(sys, std::move(stages), layers, devices, worker_thread);
  engine->workers_ = local_workers(pipeline);
  engine->max_model_len_ = options.max_model_len;
  engine->batcher_ = spawn_batcher(sys, std::move(options), std::move(pipeline));
  return engine;
}

Engine::~Engine() { shutdown(); }

session_actor Engine::generate(SessionRequest request, client_actor client) {
  return spawn_session(sys_, batcher_, tokenizer_, std::move(request), std::move(client));
}

session_actor Engine::generate(SessionRequest request, SessionCallbacks callbacks) {
  return spawn_session(sys_, batcher_, tokenizer_, std::move(request), std::move(callbacks));
}

void Engine::shutdown() {
  if (batcher_) caf::anon_send_exit(batcher_, caf::exit_reason::user_shutdown);
  for (auto& w : workers_) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  batcher_ = nullptr;
  workers_.clear();
}

}  // namespace orzo
