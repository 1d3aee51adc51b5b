#pragma once
// How the model is serving: its health (anyone -> batcher `health`: /health, a joining
// worker's wait) and the batcher's counters (anyone -> batcher `stats`: what /metrics shows),
// for the model and for each of its replicas (whole-model pipelines behind the one batcher).

#include "protocol/membership.hpp"

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace orzo {

struct ReplicaHealth {
  bool healthy = false;
  std::string detail;        // why not, when not
  std::vector<WorkerInfo> workers;
  std::vector<WorkerInfo> standby;  // joined for a stage another worker serves; the first takes over
};

struct ModelHealth {
  bool healthy = false;      // some replica serves
  std::string detail;        // why none does, when none does
  std::vector<ReplicaHealth> replicas;
};

struct ReplicaStats {
  bool healthy = false;
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;
  uint64_t steps = 0;
  uint64_t routed = 0;       // requests admitted to it, or moved to it from a lost replica
  uint64_t recoveries = 0;
};

struct BatcherStats {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t paused = 0;                    // requests out of the batch until their readers catch up
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;
  uint64_t steps = 0;
  uint64_t prompt_tokens = 0;            // admitted prompt tokens
  uint64_t generated_tokens = 0;
  uint64_t prefix_query_tokens = 0;      // prompt tokens looked up in the prefix cache
  uint64_t prefix_hit_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t recoveries = 0;               // stage losses the requests in flight came through
  // their pauses, loss to serving again, summed; in nanoseconds, since a standby that takes
  // over a lone stage has the model serving again within a microsecond
  uint64_t recovery_pause_ns = 0;
  std::vector<uint64_t> finished;        // requests ended, indexed by FinishReason
  uint64_t moved = 0;                    // requests that went on in another replica after a loss
  std::vector<ReplicaStats> replicas;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ReplicaHealth& x) {
  return f(caf::meta::type_name("replica_health"), x.healthy, x.detail, x.workers, x.standby);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ModelHealth& x) {
  return f(caf::meta::type_name("model_health"), x.healthy, x.detail, x.replicas);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ReplicaStats& x) {
  return f(caf::meta::type_name("replica_stats"), x.healthy, x.running, x.waiting, x.kv_blocks_total, x.kv_blocks_used,
           x.steps, x.routed, x.recoveries);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BatcherStats& x) {
  return f(caf::meta::type_name("batcher_stats"), x.running, x.waiting, x.paused, x.kv_blocks_total, x.kv_blocks_used,
           x.steps, x.prompt_tokens, x.generated_tokens, x.prefix_query_tokens, x.prefix_hit_tokens,
           x.preemptions, x.recoveries, x.recovery_pause_ns, x.finished, x.moved, x.replicas);
}

}  // namespace orzo
