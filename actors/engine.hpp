#pragma once
// The public way into orzo for an application with its own caf::actor_system: load a model,
// spawn its workers (one per placement stage, of every replica) and its batcher, and start sessions whose
// output arrives at the application's own actor or callback.

#include "actors/batcher.hpp"
#include "actors/session.hpp"
#include "actors/worker.hpp"
#include "batching/scheduler.hpp"
#include "protocol/interfaces.hpp"
#include "stages/stage_factory.hpp"

#include <caf/timespan.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace caf {
class actor_system;
}

namespace orzo {

class LayerBackend;
class Model;
class Tokenizer;

struct EngineOptions {
  std::string model;                  // HF directory or .gguf file
  std::string quantize;               // re-encode the matrices at load as `orzo quantize` TYPE would; empty: as stored
  std::string placement = "cpu";      // stages, see stages/placement.hpp; remote ones wait for `orzo worker`
  int32_t replicas = 1;               // data-parallel copies of the placement (stages/placement.hpp's parse_replicas)
  StageOptions backend;               // threads, KV budget, GPU memory share, CUDA graphs
  SchedulerConfig scheduler;
  int32_t kv_blocks = 0;              // 0: sized by the stage factory (stages/stage_factory.hpp)
  int32_t block_size = 16;
  bool prefix_caching = true;
  // Sliding-window layers keep only their window's KV where that saves memory (core/kv_layout.hpp);
  // false: every layer keeps every position, as one table.
  bool hybrid_kv = true;
  bool async_scheduling = true;       // BatcherOptions::async_scheduling
  int32_t max_model_len = 0;          // 0: the model's context length
  caf::timespan step_timeout = std::chrono::minutes(10);
  caf::timespan recovery_timeout = std::chrono::seconds(30);  // BatcherOptions::recovery_timeout
  bool load_tokenizer = true;         // false: no tokenize(), no text in the output (benchmarks)
  WorkerThread worker_thread = WorkerThread::automatic;  // see actors/worker.hpp
  // Called while the weights are read in (bytes done, bytes in all); none: they are paged
  // in lazily by the first steps.
  std::function<void(size_t done, size_t total)> on_load_progress;
};

// The KV pool every replica's stages hold with the same block ids, as the engine made it.
struct KvPool {
  int32_t blocks = 0, block_size = 0, max_model_len = 0;
  std::vector<int32_t> windows;  // its groups of block tables (core/kv_layout.hpp)
  size_t bytes = 0;              // of the stages in this process, every replica's
  std::vector<DType> dtypes;     // their elements, each type once (CUDA stages keep their compute type)
  // How many sequences of max_model_len tokens it holds at once, decoding.
  double full_contexts() const;
};

class Engine {
 public:
  // Loads the model and its tokenizer and spawns the actors; throws LoadError or
  // std::invalid_argument with a one-line message.
  static std::unique_ptr<Engine> start(caf::actor_system& sys, const EngineOptions& options);
  // The same runtime over backends the caller made (the null backend, test doubles): one
  // stage per backend, in order. No tokenizer: no tokenize(), no text in the output.
  static std::unique_ptr<Engine> start_with(caf::actor_system& sys, std::vector<std::unique_ptr<LayerBackend>> stages,
                                            BatcherOptions options,
                                            WorkerThread worker_thread = WorkerThread::automatic);

  ~Engine();  // stops the actors
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const batcher_actor& batcher() const { return batcher_; }
  const std::vector<worker_actor>& workers() const { return workers_; }  // the local ones, replica by replica
  std::shared_ptr<const Tokenizer> tokenizer() const { return tokenizer_; }
  std::shared_ptr<const Model> model() const { return model_; }
  // The context and vocabulary the batcher holds requests to (check_request).
  const RequestBounds& bounds() const { return bounds_; }
  const KvPool& kv_pool() const { return kv_pool_; }  // empty for start_with's engines

  // The prompt's ids, for sessions, which take ids only: applications start from text here
  // without the tokenizer's headers, which the installed package leaves out. Throws
  // std::logic_error when the engine was started without a tokenizer.
  std::vector<int32_t> tokenize(const std::string& text, bool add_special_tokens = true) const;

  session_actor generate(SessionRequest request, client_actor client);
  session_actor generate(SessionRequest request, SessionCallbacks callbacks);

  void shutdown();  // exits the batcher (which ends every live request) and the workers

 private:
  explicit Engine(caf::actor_system& sys) : sys_(sys) {}

  caf::actor_system& sys_;
  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<worker_actor> workers_;
  batcher_actor batcher_;
  RequestBounds bounds_;
  KvPool kv_pool_;
};

}  // namespace orzo
