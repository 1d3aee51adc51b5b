#pragma once
// The checks every backend makes on a step before it touches memory: a malformed batch (a
// token outside the vocabulary, a position past its block table, a block id outside the pool,
// or a block a row reads given back) is refused with std::invalid_argument, never read out of
// bounds.
#include <cstdint>

#include "core/forward_batch.hpp"
#include "core/kv_layout.hpp"

namespace orzo {

struct BatchBounds {
  bool embeds = false;            // tokens are read: they must be inside the vocabulary
  int64_t vocab_size = 0;
  int64_t hidden_floats = -1;     // the hidden state the caller passed; checked unless embeds or < 0
  int64_t hidden_size = 0;
  int32_t kv_blocks = 0;
  int32_t block_size = 0;
  const KvLayout* layout = nullptr;  // the stage's: the batch has its groups, whose windows it checks
};

// Throws std::invalid_argument, "forward batch: ..." naming the first problem.
void check_batch(const ForwardBatch& batch, const BatchBounds& bounds);

}  // namespace orzo
