#pragma once
// Replies about the serving side: a worker's own description (batcher -> worker
// `describe`; also what a joining worker process tells the batcher with `join`), what a
// stage must hold to join (worker process -> batcher `terms`), the model's health (anyone ->
// batcher `health`), and the batcher's counters (anyone -> batcher `stats`, what /metrics
// shows).

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace orzo {

struct WorkerInfo {
  std::string device;        // "cpu", "cuda:0", "null"
  int32_t first_layer = 0;   // [first_layer, end_layer)
  int32_t end_layer = 0;
  int32_t kv_blocks = 0;     // size of its KV pool
};

// A worker process builds its stage to these before it joins: the KV pool must have the
// batcher's block ids, and a step may carry up to max_rows rows of up to max_seqs sequences,
// none longer than max_model_len tokens.
struct StageTerms {
  int32_t kv_blocks = 0;
  int32_t block_size = 0;
  int32_t max_rows = 0;
  int32_t max_seqs = 0;
  int32_t max_model_len = 0;
};

struct ModelHealth {
  bool healthy = false;
  std::string detail;        // why not, when not
  std::vector<WorkerInfo> workers;
};

struct BatcherStats {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;
  uint64_t steps = 0;
  uint64_t prompt_tokens = 0;            // admitted prompt tokens
  uint64_t generated_tokens = 0;
  uint64_t prefix_query_tokens = 0;      // prompt tokens looked up in the prefix cache
  uint64_t prefix_hit_tokens = 0;
  uint64_t preemptions = 0;
  std::vector<uint64_t> finished;        // requests ended, indexed by FinishReason
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerInfo& x) {
  return f(caf::meta::type_name("worker_info"), x.device, x.first_layer, x.end_layer, x.kv_blocks);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StageTerms& x) {
  return f(caf::meta::type_name("stage_terms"), x.kv_blocks, x.block_size, x.max_rows, x.max_seqs, x.max_model_len);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ModelHealth& x) {
  return f(caf::meta::type_name("model_health"), x.healthy, x.detail, x.workers);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BatcherStats& x) {
  return f(caf::meta::type_name("batcher_stats"), x.running, x.waiting, x.kv_blocks_total, x.kv_blocks_used,
           x.steps, x.prompt_tokens, x.generated_tokens, x.prefix_query_tokens, x.prefix_hit_tokens,
           x.preemptions, x.finished);
}

}  // namespace orzo
