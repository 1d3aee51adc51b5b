#pragma once
// One step of work for a layer range: a flat batch of token rows drawn from many
// sequences. Prefill chunks and decode rows mix freely; a row knows its sequence and its
// position, and a sequence knows where its KV lives (its block table).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/kv_layout.hpp"

namespace orzo {

// A row token not known when the step was planned (async scheduling plans a step while the
// one before it computes): the token the sampling stage drew, in that step, for the row's
// position. Only a stage that both embeds and samples can fill it in (BatchSampler::fill_pending).
inline constexpr int32_t kPendingToken = -1;

struct ForwardBatch {
  std::vector<int32_t> tokens;     // per row (or kPendingToken); read by the range that embeds
  std::vector<int32_t> positions;  // per row: position in its sequence (0-based)
  std::vector<int32_t> seq_index;  // per row: its sequence
  // Per group of layers sharing a table (core/kv_layout.hpp), then per sequence: the KV block
  // ids holding positions [0, block_size * size()), at [group * sequences() + seq]. A
  // sliding group's table holds kNoBlock before the window of the step's rows.
  std::vector<std::vector<int32_t>> block_tables;
  int32_t kv_groups = 1;
  // Rows whose logits the last range computes, in the order they come back.
  std::vector<int32_t> logit_rows;

  int64_t rows() const { return static_cast<int64_t>(positions.size()); }
  int32_t sequences() const { return static_cast<int32_t>(block_tables.size()) / kv_groups; }
  const std::vector<int32_t>& table(int32_t group, int32_t seq) const {
    return block_tables[static_cast<size_t>(group) * static_cast<size_t>(sequences()) + static_cast<size_t>(seq)];
  }

  // Appends `count` consecutive tokens of sequence `seq` starting at position `first_pos`;
  // the last one is marked for logits when `want_logits`.
  void add_chunk(int32_t seq, const int32_t* toks, int32_t count, int32_t first_pos, bool want_logits) {
    add_chunk_with_logits(seq, toks, count, first_pos, want_logits ? 1 : 0);
  }
  // The same, with its last `logit_count` rows (at most `count`) marked for logits: scoring a
  // prompt wants the logits of every row that predicts a prompt token.
  void add_chunk_with_logits(int32_t seq, const int32_t* toks, int32_t count, int32_t first_pos, int32_t logit_count) {
    for (int32_t i = 0; i < count; ++i) {
      tokens.push_back(toks[i]);
      positions.push_back(first_pos + i);
      seq_index.push_back(seq);
      if (i >= count - logit_count) logit_rows.push_back(static_cast<int32_t>(positions.size()) - 1);
    }
  }
};

}  // namespace orzo
