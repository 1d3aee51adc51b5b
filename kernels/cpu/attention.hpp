#pragma once
// Causal grouped-query attention over the paged KV cache: each row attends to the
// positions of its own sequence up to its own, read through that sequence's block table.
// Rows of a sequence at consecutive positions (a prefill chunk) are taken together, so
// that each K/V element read serves several rows and query heads. A row's result never
// depends on the other sequences in the batch, nor on how its own sequence is chunked,
// unless long contexts are split across threads (split_contexts below).
#include <cstdint>
#include <optional>

#include "core/forward_batch.hpp"
#include "core/kv_cache.hpp"
#include "core/thread_pool.hpp"

namespace orzo::cpu {

struct AttentionShape {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  std::optional<int64_t> sliding_window;  // a row at position p sees (p - window, p]
  double scale = 0.0;    // a score is q·k times this; 0: 1/sqrt(head_dim)
  double softcap = 0.0;  // > 0: a score s becomes softcap * tanh(s / softcap) (Gemma 2)
};

// Where a layer's K/V lives: its plane of the cache's blocks, and the group of block tables
// (core/kv_layout.hpp) whose ids address them.
struct KvPlace {
  int64_t plane = 0;
  int32_t group = 0;
};

// Stores one token's kv_dim keys and values (f32) in `plane` of the cache, in its dtype.
void store_kv(KvCache& cache, int64_t plane, int32_t block, int32_t slot, const float* key, const float* value);

// q: [rows, num_heads * head_dim]; out: same shape. K/V of every visible position,
// including the rows of this batch, must already be in `cache` at `at`.
//
// With `split_contexts`, a decode row whose context outweighs its share of the call's work
// is split into pieces of its positions that run on several threads and are merged after
// (flash-decoding), so that a few long sequences use every thread; its result then differs
// by rounding with the batch around it. Without, a row's result never does.
void paged_attention(const float* q, const ForwardBatch& batch, KvCache& cache, KvPlace at,
                     const AttentionShape& shape, float* out, ThreadPool& pool, bool split_contexts = false);

}  // namespace orzo::cpu
