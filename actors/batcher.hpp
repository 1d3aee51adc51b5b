#pragma once
// The batcher: exactly one per model. It admits requests from sessions, plans each step with
// the scheduler and the KV block manager (batching/), sends the step down the pipeline
// of workers, and fans the sampled tokens out to the sessions. A stage may be served by a
// worker in another process that joins (and, after its death, joins again) at run time; a
// pipeline serves only while every stage has a worker. Workers that join for a stage already
// served stand by; when a stage is lost, its requests wait, preempted, for a standby or a new
// worker to take over, and go on by recompute.
//
// The model may have several replicas: whole-model pipelines, each with its own KV pool and
// scheduler, stepping independently. A request goes to the serving replica with the most KV
// to spare for it, counting the prefix it has cached; when a replica loses a stage and no
// standby takes over, its requests go on in the replicas that serve.

#include "batching/scheduler.hpp"
#include "protocol/interfaces.hpp"
#include "runtime/layer_backend.hpp"

#include <caf/timespan.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

namespace caf {
class actor_system;
}

namespace orzo {

struct BatcherOptions {
  SchedulerConfig scheduler;
  int32_t kv_blocks = 0;                  // the pool every worker holds, in blocks
  int32_t block_size = 16;
  std::vector<int32_t> kv_windows = {0};  // the groups of block tables every worker keeps (core/kv_layout.hpp)
  bool prefix_caching = true;
  int32_t max_model_len = 0;              // prompt + generated tokens at most
  int32_t vocab_size = 0;                 // prompt ids must lie in [0, vocab_size)
  std::vector<int32_t> eos_token_ids;
  caf::timespan step_timeout = std::chrono::minutes(10);  // a stage that answers later is lost
  // How long admitted requests wait, preempted, for a lost stage to be served again before
  // they fail with worker_lost; 0: they fail at once.
  caf::timespan recovery_timeout = std::chrono::seconds(30);
  // Plan each step while the one before it computes (vLLM's async scheduling, on by default
  // there too): sampling, delivery and the next plan overlap the forward pass instead of
  // following it. Pipelines of one stage only (it fills in the tokens it drew); others step
  // one at a time.
  bool async_scheduling = true;
  bool check_invariants = false;          // audit the block accounting after every step (tests)
};

// One stage of the pipeline as the batcher starts: its layers and its worker, or no worker
// when one is to join from another process (`join`).
struct PipelineStage {
  LayerRange layers;
  worker_actor worker;
};

// One replica's pipeline, first stage to last, tiling the model's layers.
using Pipeline = std::vector<PipelineStage>;

// One pipeline per replica, all of the same stages; workers of adjacent stages given here are
// already chained (each knows its next). The batcher chains the workers that join.
batcher_actor spawn_batcher(caf::actor_system& sys, BatcherOptions options, std::vector<Pipeline> replicas);

}  // namespace orzo
