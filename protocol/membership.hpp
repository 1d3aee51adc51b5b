#pragma once
// Who serves the pipeline: a worker's own description (batcher -> worker `describe`; also what
// a joining worker process tells the batcher with `join`) and what a stage must hold to join
// (worker process -> batcher `terms`).

#include "core/stage_terms.hpp"

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
  std::vector<int32_t> kv_windows = {0};  // its groups of block tables (core/kv_layout.hpp)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerInfo& x) {
  return f(caf::meta::type_name("worker_info"), x.device, x.first_layer, x.end_layer, x.kv_blocks,
           x.kv_windows);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StageTerms& x) {
  return f(caf::meta::type_name("stage_terms"), x.kv_blocks, x.block_size, x.max_rows, x.max_seqs, x.max_model_len,
           x.kv_windows);
}

}  // namespace orzo
