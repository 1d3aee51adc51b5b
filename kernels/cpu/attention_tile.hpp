#pragma once
// One tile of attention: up to kTileLanes query vectors of one sequence that share one KV
// head (a few rows' worth of that head's query heads), run over the positions they see in
// order, a chunk of keys at a time, with an online softmax.
//
// Each K and V element read serves the whole tile. A query's result does not depend on which
// tile, lane or tile width holds it: chunks are windows of 16 slots at fixed places in their
// block whatever the tile, so a key takes the same place in the sums in every tile; a chunk
// it sees none of leaves its state exactly unchanged; and its arithmetic, the same sequence
// of operations in every lane and either layout of the scores, never mixes with another's.
// Its fused multiply-adds are written out by hand, so none of this rests on which products
// the optimizer would fuse in which instantiation; and an f16 cache's keys and values,
// widened exactly, take the same operations as an f32 cache's.
#include <cstdint>

#include "core/kv_cache.hpp"

namespace orzo::cpu {

// Queries per tile: one vector register's worth of floats on the ISA level that runs
// (KernelTable::tile_lanes), at most this many.
inline constexpr int kMaxTileLanes = 16;

struct TileQuery {
  const float* q;  // head_dim values
  float* out;      // head_dim values
  int32_t first, last;  // the positions it sees, [first, last]
  // When set, the softmax's running max and sum once [first, last] is seen (base 2, of the
  // scaled scores): what merging results over parts of a query's positions takes.
  float* stats;
};

// One KV head of one sequence in the cache.
struct HeadCache {
  const KvCache* cache;
  int64_t plane;
  const int32_t* block_table;
  int64_t offset;  // of the head within a slot's kv_dim floats
};

// The tile itself is kernels().attend_tile (isa.hpp), compiled per ISA level: q_scale
// multiplies the scores before the base-2 softmax, log2(e) / sqrt(head_dim); with
// score_cap > 0 a scaled score s then becomes score_cap * tanh(s) (Gemma 2's soft cap, with
// log2(e) in score_cap); `count` <= tile_lanes; the K/V of every position a query sees must
// be in the cache.

}  // namespace orzo::cpu
