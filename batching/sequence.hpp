#pragma once
// The scheduler's view of one request: token ids only (prompt, then what was generated),
// how far its KV has been computed, and the blocks holding that KV. The batcher owns the
// object and appends sampled tokens; the scheduler moves it between its queues.
#include <cstdint>
#include <limits>
#include <vector>

#include "batching/block_manager.hpp"
#include "core/forward_batch.hpp"

namespace orzo {

struct Sequence {
  // parked: out of the batch and of every queue (its client stopped reading), until unparked.
  enum class State { waiting, running, parked, finished };

  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt then generated tokens
  // The last `pending` tokens are kPendingToken: drawn by steps in flight, not yet known here.
  int32_t pending = 0;
  int32_t in_flight = 0;  // steps sent and not yet answered that compute rows of it (the batcher counts)
  int32_t prompt_len = 0;
  int32_t num_computed = 0;  // leading tokens whose KV is in the cache
  int32_t num_cached = 0;    // prompt tokens the prefix cache served at first admission (for usage)
  // The prefix cache serves at most this many leading tokens: the rows of a prompt still being
  // scored must run for their logits.
  int32_t cacheable = std::numeric_limits<int32_t>::max();
  int32_t priority = 0;      // lower is served first (vLLM's convention); ties by arrival
  uint64_t arrival = 0;      // set by Scheduler::add, increasing
  int32_t preemptions = 0;
  State state = State::waiting;
  SequenceBlocks blocks;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_known() const { return num_tokens() - pending; }
};

}  // namespace orzo
