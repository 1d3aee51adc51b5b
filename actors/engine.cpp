#include "actors/engine.hpp"

#include "actors/output_constraints.hpp"
#include "actors/worker.hpp"
#include "core/kv_layout.hpp"
#include "runtime/model.hpp"
#include "stages/placement.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace orzo {
namespace {

// One step per replica is in flight at a time, so at most `replicas` stages compute at once,
// each blocking one scheduler thread. Automatic sharing waits for two more, one for the batcher,
// one for the sessions; even when asked for, sharing the only scheduler thread would stall the
// batcher. A GPU stage waits on its device for most of a step: it always gets a thread of its own.
WorkerThread resolve(WorkerThread choice, caf::actor_system& sys, const std::string& device, size_t replicas) {
  if (device.rfind("cuda", 0) == 0) return WorkerThread::own;
  const auto threads = sys.scheduler().num_workers();
  if (choice == WorkerThread::automatic) return threads >= replicas + 2 ? WorkerThread::scheduler : WorkerThread::own;
  return choice == WorkerThread::scheduler && threads < 2 ? WorkerThread::own : choice;
}

// Spawns a worker for every stage that has a backend, each chained to the next stage's worker
// when that one is local too. A stage without a backend waits for a worker to join.
std::vector<PipelineStage> spawn_pipeline(caf::actor_system& sys, std::vector<std::unique_ptr<LayerBackend>> backends,
                                          const std::vector<LayerRange>& layers, const std::vector<std::string>& devices,
                                          WorkerThread choice, const std::shared_ptr<grammar::ConstraintCache>& constraints,
                                          size_t replicas = 1) {
  std::vector<PipelineStage> stages(backends.size());
  worker_actor next;
  for (size_t i = backends.size(); i-- > 0;) {
    stages[i].layers = layers[i];
    if (backends[i])
      stages[i].worker = spawn_worker(sys, std::move(backends[i]), devices[i], next, resolve(choice, sys, devices[i], replicas),
                                      i + 1 == backends.size() ? constraints : nullptr);
    next = stages[i].worker;
  }
  return stages;
}

std::vector<worker_actor> local_workers(const std::vector<PipelineStage>& stages) {
  std::vector<worker_actor> workers;
  for (const auto& stage : stages)
    if (stage.worker) workers.push_back(stage.worker);
  return workers;
}

}  // namespace

std::unique_ptr<Engine> Engine::start(caf::actor_system& sys, const EngineOptions& options) {
  std::unique_ptr<Engine> engine(new Engine(sys));
  engine->model_ = Model::load(options.model, options.quantize);
  if (options.on_load_progress) engine->model_->page_in(options.on_load_progress);
  if (options.load_tokenizer)
    engine->tokenizer_ = std::make_shared<const Tokenizer>(Tokenizer::for_model(options.model));
  const auto& cfg = engine->model_->config();
  const auto replicas = parse_replicas(options.placement, options.replicas, static_cast<int32_t>(cfg.num_layers));

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
  b.recovery_timeout = options.recovery_timeout;
  b.async_scheduling = options.async_scheduling;

  // No windows: the stage factory chooses the KV layout; {0}: one table for every layer.
  const StageTerms terms{options.kv_blocks,           b.block_size,    b.scheduler.max_num_batched_tokens,
                         b.scheduler.max_num_seqs,    b.max_model_len, options.hybrid_kv ? std::vector<int32_t>{} : std::vector<int32_t>{0}};
  auto made = make_replica_backends(engine->model_, replicas, terms, options.backend);
  b.kv_blocks = made.front().kv_blocks;
  b.kv_windows = made.front().kv_windows;
  engine->kv_pool_ = KvPool{b.kv_blocks, b.block_size, b.max_model_len, b.kv_windows, 0, {}};
  for (const auto& replica : made)
    for (const auto& backend : replica.backends)
      if (backend) {
        engine->kv_pool_.bytes += backend->kv_bytes();
        auto& dtypes = engine->kv_pool_.dtypes;
        if (std::find(dtypes.begin(), dtypes.end(), backend->kv_dtype()) == dtypes.end()) dtypes.push_back(backend->kv_dtype());
      }
  const auto constraints =
      engine->tokenizer_ ? output_constraints(*engine->tokenizer_, engine->model_->config()) : nullptr;
  std::vector<Pipeline> pipelines;
  for (size_t r = 0; r < replicas.size(); ++r) {
    std::vector<LayerRange> layers;
    std::vector<std::string> devices;
    for (const auto& stage : replicas[r]) {
      layers.push_back(stage.layers);
      devices.push_back(stage.device == "remote" ? "remote"
                                                 : stage.device + ":" + std::to_string(stage.device_index) + " layers " +
                                                       layers_text(stage.layers));
    }
    pipelines.push_back(spawn_pipeline(sys, std::move(made[r].backends), layers, devices, options.worker_thread, constraints,
                                       replicas.size()));
    const auto local = local_workers(pipelines.back());
    engine->workers_.insert(engine->workers_.end(), local.begin(), local.end());
  }
  engine->bounds_ = RequestBounds{b.max_model_len, b.vocab_size};
  engine->batcher_ = spawn_batcher(sys, std::move(b), std::move(pipelines));
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
  auto pipeline = spawn_pipeline(sys, std::move(stages), layers, devices, worker_thread, nullptr);
  engine->workers_ = local_workers(pipeline);
  engine->bounds_ = RequestBounds{options.max_model_len, options.vocab_size};
  engine->batcher_ = spawn_batcher(sys, std::move(options), {std::move(pipeline)});
  return engine;
}

double KvPool::full_contexts() const {
  const int64_t per_sequence = blocks_for_tokens(windows, max_model_len, block_size, 1);
  return per_sequence > 0 ? static_cast<double>(blocks) / static_cast<double>(per_sequence) : 0.0;
}

Engine::~Engine() { shutdown(); }

std::vector<int32_t> Engine::tokenize(const std::string& text, bool add_special_tokens) const {
  if (!tokenizer_) throw std::logic_error("this engine has no tokenizer (it was started without one): give prompt ids");
  return tokenizer_->encode(text, add_special_tokens);
}

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
