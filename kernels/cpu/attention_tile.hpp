#pragma once
// One tile of attention: up to kTileLanes query vectors of one sequence that share one KV
// head (a few rows' worth of that head's query heads), run over the positions they see in
// order, a chunk of keys at a time, with an online softmax.
//
// The tile's queries sit in the lanes of its score vectors, so K is used as stored (no
// transposing) and each K and V element read serves the whole tile. A query's result does
// not depend on which tile, lane or tile width holds it: chunks end at the same slots
// whatever the tile, a chunk it sees none of leaves its state exactly unchanged, and its
// arithmetic, the same sequence of operations in every lane, never mixes with another's.
#include <cstdint>

#include "core/kv_cache.hpp"

namespace orzo::cpu {

// Queries per tile: one vector register's worth of floats. Twice AVX2's 8 would not fit
// its 16 registers.
#if defined(__AVX512F__)
inline constexpr int kTileLanes = 16;
#else
inline constexpr int kTileLanes = 8;
#endif

struct TileQuery {
  const float* q;  // head_dim values
  float* out;      // head_dim values
  int32_t first, last;  // the positions it sees, [first, last]
};

// One KV head of one sequence in the cache.
struct HeadCache {
  KvCache* cache;
  int64_t layer;
  const int32_t* block_table;
  int64_t offset;  // of the head within a slot's kv_dim floats
};

// q_scale multiplies the scores before the base-2 softmax: log2(e) / sqrt(head_dim).
// `count` <= kTileLanes; the K/V of every position a query sees must be in the cache.
void attend_tile(const TileQuery* queries, int count, const HeadCache& kv, int64_t head_dim, float q_scale);

}  // namespace orzo::cpu
