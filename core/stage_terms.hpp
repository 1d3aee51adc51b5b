#pragma once
// What one pipeline stage must hold to serve a batcher's steps: the KV pool must have the
// batcher's block ids, and a step may carry up to max_rows rows of up to max_seqs sequences,
// none longer than max_model_len tokens; a step's block tables come in the groups of
// kv_windows (core/kv_layout.hpp). The batcher states them (protocol/membership.hpp); the
// stage factory builds backends to them.
#include <cstdint>
#include <vector>

namespace orzo {

struct StageTerms {
  int32_t kv_blocks = 0;
  int32_t block_size = 0;
  int32_t max_rows = 0;
  int32_t max_seqs = 0;
  int32_t max_model_len = 0;
  // Per group of block tables, 0 for global layers, else the window; empty: the stage
  // factory chooses (stages/stage_factory.hpp's kv_layout_for).
  std::vector<int32_t> kv_windows;
};

}  // namespace orzo
