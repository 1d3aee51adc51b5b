#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/cpu/attention_tile.hpp"
#include "kernels/cpu/isa.hpp"

namespace orzo::cpu {

namespace {

// The first position a row at `pos` sees.
int32_t first_seen(int32_t pos, const AttentionShape& shape) {
  if (!shape.sliding_window) return 0;
  return std::max<int32_t>(0, pos - static_cast<int32_t>(*shape.sliding_window) + 1);
}

// A sequence's rows at consecutive positions: a prefill chunk, or a lone decode row.
struct Run {
  int64_t start, end;  // rows [start, end) of the batch
};

std::vector<Run> make_runs(const ForwardBatch& batch) {
  std::vector<Run> runs;
  const auto pos = [&](int64_t row) { return batch.positions[static_cast<size_t>(row)]; };
  const auto seq = [&](int64_t row) { return batch.seq_index[static_cast<size_t>(row)]; };
  for (int64_t start = 0, end = 0; start < batch.rows(); start = end) {
    end = start + 1;
    while (end < batch.rows() && seq(end) == seq(start) && pos(end) == pos(end - 1) + 1) ++end;
    runs.push_back({start, end});
  }
  return runs;
}

// Up to a tile's lanes of query vectors of one run, whose queries are numbered row by row,
// the `group` heads sharing a KV head side by side.
struct TileItem {
  int32_t run;
  int64_t query;  // the tile's first query within the run
  int count;
  int32_t cost;  // positions its queries span: their keys are read once per tile
};

std::vector<TileItem> make_tiles(const ForwardBatch& batch, const std::vector<Run>& runs, int64_t group,
                                 const AttentionShape& shape, int lanes) {
  std::vector<TileItem> tiles;
  const auto pos = [&](int64_t row) { return batch.positions[static_cast<size_t>(row)]; };
  for (size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    const int64_t queries = (run.end - run.start) * group;
    for (int64_t first = 0; first < queries; first += lanes) {
      const int count = static_cast<int>(std::min<int64_t>(lanes, queries - first));
      const int32_t top = pos(run.start + (first + count - 1) / group);
      tiles.push_back({static_cast<int32_t>(r), first, count, top - first_seen(pos(run.start + first / group), shape) + 1});
    }
  }
  // Longest first, so the dynamic schedule ends on short tiles and threads finish together.
  std::stable_sort(tiles.begin(), tiles.end(), [](const TileItem& a, const TileItem& b) { return a.cost > b.cost; });
  return tiles;
}

// An f16 cache's keys and values are widened to f32 as a tile reads them, so a run that
// takes several tiles a KV head (a 512-row prefill chunk of 4 query heads a KV head: 128)
// would widen its prefix once per tile, and its attention took 1.3-1.5x the f32 cache's.
// Such runs' blocks are widened once a call into an f32 copy, which their tiles read
// instead: the same values, so the same results bit for bit. The copy belongs to the calling
// thread and is kept for its next call; runs past kWidenedBytes keep widening in their tiles.
constexpr size_t kWidenedBytes = size_t{64} << 20;

class WidenedRuns {
 public:
  // Widens the blocks of each run in `runs` with more queries than a tile holds.
  WidenedRuns(const ForwardBatch& batch, const std::vector<Run>& runs, const KvCache& cache, KvPlace at,
              int64_t group, const AttentionShape& shape, int lanes, ThreadPool& pool) {
    if (cache.dtype() != DType::F16) return;  // nothing to widen, and nothing allocated on the f32 path
    tables_.resize(runs.size());
    const int32_t bs = cache.block_size();
    const size_t block_bytes = KvCache::bytes_per_block_plane(bs, cache.kv_dim(), DType::F32);
    std::vector<int32_t> copies;  // block i of the copy: the cache's block copies[i]
    for (size_t r = 0; r < runs.size(); ++r) {
      const Run& run = runs[r];
      if ((run.end - run.start) * group <= lanes) continue;
      const int32_t seq = batch.seq_index[static_cast<size_t>(run.start)];
      const int32_t first = first_seen(batch.positions[static_cast<size_t>(run.start)], shape) / bs;
      const int32_t last = batch.positions[static_cast<size_t>(run.end - 1)] / bs;
      if ((copies.size() + static_cast<size_t>(last - first + 1)) * block_bytes > kWidenedBytes) continue;
      const std::vector<int32_t>& table = batch.table(at.group, seq);
      tables_[r].assign(table.size(), 0);  // blocks before `first` are never read
      for (int32_t b = first; b <= last; ++b) {
        tables_[r][static_cast<size_t>(b)] = static_cast<int32_t>(copies.size());
        copies.push_back(table[static_cast<size_t>(b)]);
      }
    }
    if (copies.empty()) return;
    thread_local std::unique_ptr<KvCache> copy;
    if (!copy || copy->num_blocks() < static_cast<int32_t>(copies.size()) || copy->block_size() != bs ||
        copy->kv_dim() != cache.kv_dim())
      copy = std::make_unique<KvCache>(1, static_cast<int32_t>(kWidenedBytes / block_bytes), bs, cache.kv_dim());
    KvCache& into = *copy;
    copy_ = &into;
    const int64_t n = bs * cache.kv_dim();
    const KernelTable& k = kernels();
    pool.parallel_for(static_cast<int64_t>(copies.size()), [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) {
        const int32_t from = copies[static_cast<size_t>(i)], to = static_cast<int32_t>(i);
        k.half_row_to_f32(DType::F16, reinterpret_cast<const uint8_t*>(cache.keys<uint16_t>(at.plane, from)), n,
                          into.keys<float>(0, to));
        k.half_row_to_f32(DType::F16, reinterpret_cast<const uint8_t*>(cache.value<uint16_t>(at.plane, from, 0)), n,
                          into.value<float>(0, to, 0));
      }
    });
  }

  // Where run r's tiles read the KV head at `offset`.
  HeadCache head(const ForwardBatch& batch, const std::vector<Run>& runs, const KvCache& cache, KvPlace at, size_t r,
                 int64_t offset) const {
    if (!tables_.empty() && !tables_[r].empty()) return {copy_, 0, tables_[r].data(), offset};
    const int32_t seq = batch.seq_index[static_cast<size_t>(runs[r].start)];
    return {&cache, at.plane, batch.table(at.group, seq).data(), offset};
  }

 private:
  // Per run (none for an f32 cache): block ids in the copy, empty where it reads the cache.
  std::vector<std::vector<int32_t>> tables_;
  const KvCache* copy_ = nullptr;
};

// What the threads take: a tile's positions whole, or one piece of them. With split_contexts
// a decode row whose context outweighs its share of the call (a few long sequences: one tile
// a KV head each, fewer tiles than threads) is split into pieces that run at once; each
// writes its result and softmax stats to the partials, which are merged after.
struct Piece {
  int32_t tile;
  int32_t lo, hi;    // the positions it reads, within its queries' [first, last]
  int64_t partial;   // -1: the whole tile, writing its outputs; else its first slot in the partials
  int32_t cost;
};

// A split tile: its `parts` pieces' results start at slot `partial`, a piece's kv_heads * count
// queries apart, KV head by KV head, lane by lane within.
struct Split {
  int32_t tile, parts;
  int64_t partial;
};

// Below this many positions a piece's fixed cost (its queries, its share of the merge) is
// more than the parallelism it brings to a call with work enough for every thread.
constexpr int32_t kMinPiece = 512;
// A piece cut only to even the threads out (make_pieces) keeps at least this many: on a
// Zen 5 (attention_bench, SmolLM2's heads at 256 positions, 2 threads) pieces of 128 ran
// 0.8x the whole heads' time, of 32 0.9x, of 16 1.35x.
constexpr int32_t kMinEvenPiece = 64;

std::vector<Piece> whole_tiles(const std::vector<TileItem>& tiles) {
  std::vector<Piece> pieces;
  for (size_t t = 0; t < tiles.size(); ++t) pieces.push_back({static_cast<int32_t>(t), 0, 0, -1, tiles[t].cost});
  return pieces;
}

// Pieces of about a quarter of each thread's share of the positions, so that the dynamic
// schedule can even the threads out; only decode rows split (every lane of their tile sees the
// same positions). Pieces are multiples of 16 positions long: without a sliding window they
// start where the tile's chunks do.
// A step of a few decode rows has few tiles, all alike, whatever their length: one
// sequence of SmolLM2 is 3 (one a KV head), so of 2 threads one would take two and the other
// wait half the call. There every tile is cut into a number of pieces that spreads the
// step's pieces evenly over the threads, when that leaves them kMinEvenPiece long.
std::vector<Piece> make_pieces(const ForwardBatch& batch, const std::vector<TileItem>& tiles, const std::vector<Run>& runs,
                               int64_t kv_heads, int threads, std::vector<Split>& splits) {
  const auto decode_row = [&](const TileItem& t) {
    const Run& run = runs[static_cast<size_t>(t.run)];
    return run.end - run.start == 1;
  };
  int64_t total = 0;
  for (const TileItem& t : tiles) total += t.cost;
  const auto piece = static_cast<int32_t>(std::max<int64_t>(kMinPiece, (total * kv_heads + 4 * threads - 1) / (4 * threads)));
  const auto whole = static_cast<int64_t>(tiles.size()) * kv_heads;
  const bool few_rows = whole < 4 * threads && std::all_of(tiles.begin(), tiles.end(), decode_row);
  const int32_t even = few_rows ? static_cast<int32_t>(threads / std::gcd(whole, int64_t{threads})) : 1;
  std::vector<Piece> pieces;
  int64_t partial = 0;
  for (size_t i = 0; i < tiles.size(); ++i) {
    const TileItem& t = tiles[i];
    int32_t asked = t.cost >= 2 * piece ? (t.cost + piece - 1) / piece : 1;
    if (const int32_t evened = (asked + even - 1) / even * even; t.cost >= evened * kMinEvenPiece) asked = evened;
    if (threads < 2 || !decode_row(t) || asked < 2) {
      pieces.push_back({static_cast<int32_t>(i), 0, 0, -1, t.cost});
      continue;
    }
    // Equal pieces rounded up to 16 positions: that may take fewer pieces than asked, never an empty one.
    const Run& run = runs[static_cast<size_t>(t.run)];
    const int32_t length = ((t.cost + asked - 1) / asked + 15) / 16 * 16;
    const int32_t parts = (t.cost + length - 1) / length;
    const int32_t last = batch.positions[static_cast<size_t>(run.start)], first = last - t.cost + 1;
    splits.push_back({static_cast<int32_t>(i), parts, partial});
    for (int32_t p = 0; p < parts; ++p) {
      const int32_t lo = first + p * length, hi = std::min(last, lo + length - 1);
      pieces.push_back({static_cast<int32_t>(i), lo, hi, partial + p * kv_heads * t.count, hi - lo + 1});
    }
    partial += parts * kv_heads * t.count;
  }
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.cost > b.cost; });
  return pieces;
}

}  // namespace

void store_kv(KvCache& cache, int64_t plane, int32_t block, int32_t slot, const float* key, const float* value) {
  if (cache.dtype() == DType::F32) {
    cache.write(plane, block, slot, key, value);
    return;
  }
  thread_local std::vector<uint8_t> halves;
  const auto n = static_cast<size_t>(cache.kv_dim());
  halves.resize(4 * n);
  const KernelTable& k = kernels();
  k.f32_row_to_half(DType::F16, key, cache.kv_dim(), halves.data());
  k.f32_row_to_half(DType::F16, value, cache.kv_dim(), halves.data() + 2 * n);
  cache.write(plane, block, slot, halves.data(), halves.data() + 2 * n);
}

void paged_attention(const float* q, const ForwardBatch& batch, KvCache& cache, KvPlace at,
                     const AttentionShape& shape, float* out, ThreadPool& pool, bool split_contexts) {
  const int64_t hd = shape.head_dim, kv_heads = shape.num_kv_heads, group = shape.num_heads / kv_heads;
  const int64_t q_stride = shape.num_heads * hd;
  // Scores go to a base-2 softmax: exp(x / sqrt(d)) = 2^(x * log2(e) / sqrt(d)). A capped
  // score takes log2(e) after its tanh.
  constexpr double kLog2e = 1.4426950408889634;
  const double scale = shape.scale > 0 ? shape.scale : 1.0 / std::sqrt(static_cast<double>(hd));
  const auto q_scale = static_cast<float>(shape.softcap > 0 ? scale / shape.softcap : kLog2e * scale);
  const auto score_cap = static_cast<float>(shape.softcap > 0 ? kLog2e * shape.softcap : 0.0);
  const KernelTable& k = kernels();
  const std::vector<Run> runs = make_runs(batch);
  const std::vector<TileItem> tiles = make_tiles(batch, runs, group, shape, k.tile_lanes);
  const WidenedRuns widened(batch, runs, cache, at, group, shape, k.tile_lanes, pool);
  std::vector<Split> splits;
  const std::vector<Piece> pieces =
      split_contexts ? make_pieces(batch, tiles, runs, kv_heads, pool.size(), splits) : whole_tiles(tiles);
  int64_t partials = 0;
  for (const Split& split : splits) partials += split.parts * kv_heads * tiles[static_cast<size_t>(split.tile)].count;
  std::vector<float> partial_out(static_cast<size_t>(partials * hd)), partial_stats(static_cast<size_t>(partials * 2));

  // The row of lane i of tile t, and where its query for KV head kvh lies in q and in out.
  const auto locate = [&](const TileItem& t, int64_t kvh, int i) {
    const int64_t row = runs[static_cast<size_t>(t.run)].start + (t.query + i) / group;
    return std::pair<int64_t, int64_t>{row, row * q_stride + (kvh * group + (t.query + i) % group) * hd};
  };
  const int64_t items = static_cast<int64_t>(pieces.size()) * kv_heads;
  pool.parallel_for_dynamic(items, [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const Piece& piece = pieces[static_cast<size_t>(item / kv_heads)];
      const TileItem& t = tiles[static_cast<size_t>(piece.tile)];
      const int64_t kvh = item % kv_heads;
      TileQuery queries[kMaxTileLanes];
      for (int i = 0; i < t.count; ++i) {
        const auto [row, offset] = locate(t, kvh, i);
        const int32_t pos = batch.positions[static_cast<size_t>(row)];
        queries[i] = {q + offset, out + offset, first_seen(pos, shape), pos, nullptr};
        if (piece.partial >= 0) {
          const int64_t slot = piece.partial + kvh * t.count + i;
          queries[i].out = partial_out.data() + slot * hd;
          queries[i].stats = partial_stats.data() + slot * 2;
          queries[i].first = piece.lo;
          queries[i].last = piece.hi;
        }
      }
      k.attend_tile(queries, t.count, widened.head(batch, runs, cache, at, static_cast<size_t>(t.run), kvh * hd), hd,
                    q_scale, score_cap);
    }
  });
  if (splits.empty()) return;

  // Each piece's result is its positions' softmax-weighted values, o_p = sum_j 2^(s_j - m_p) v_j / l_p:
  // weighted by l_p 2^(m_p - M) over the pieces' largest max M, they add up to the whole's.
  // A few rows' merge reads less than a parallel region costs to start: it runs where the call does.
  constexpr int64_t kMergedAlone = 16384;
  const int64_t merges = static_cast<int64_t>(splits.size()) * kv_heads;
  pool.parallel_for(merges, [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const Split& split = splits[static_cast<size_t>(item / kv_heads)];
      const TileItem& t = tiles[static_cast<size_t>(split.tile)];
      const int64_t kvh = item % kv_heads, stride = kv_heads * t.count;
      for (int i = 0; i < t.count; ++i) {
        const int64_t first = split.partial + kvh * t.count + i;
        float top = -std::numeric_limits<float>::infinity();
        for (int32_t p = 0; p < split.parts; ++p) top = std::max(top, partial_stats[static_cast<size_t>((first + p * stride) * 2)]);
        float* o = out + locate(t, kvh, i).second;
        std::fill(o, o + hd, 0.0f);
        float total = 0.0f;
        for (int32_t p = 0; p < split.parts; ++p) {
          const int64_t slot = first + p * stride;
          const float w = partial_stats[static_cast<size_t>(slot * 2 + 1)] * std::exp2(partial_stats[static_cast<size_t>(slot * 2)] - top);
          const float* op = partial_out.data() + slot * hd;
          for (int64_t d = 0; d < hd; ++d) o[d] += w * op[d];
          total += w;
        }
        for (int64_t d = 0; d < hd; ++d) o[d] /= total;
      }
    }
  }, partials * hd < kMergedAlone ? merges : 1);
}

}  // namespace orzo::cpu
