#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// Up to a tile's lanes of query vectors of one run: a run is a sequence's rows at consecutive positions
// (a prefill chunk, or a lone decode row), and its queries are numbered row by row, the
// `group` heads sharing a KV head side by side.
struct TileItem {
  int64_t run_row;  // the run's first row
  int64_t query;    // the tile's first query within the run
  int count;
  int32_t cost;  // positions its queries span: their keys are read once per tile
};

std::vector<TileItem> make_tiles(const ForwardBatch& batch, int64_t group, const AttentionShape& shape, int lanes) {
  std::vector<TileItem> tiles;
  const auto pos = [&](int64_t row) { return batch.positions[static_cast<size_t>(row)]; };
  const auto seq = [&](int64_t row) { return batch.seq_index[static_cast<size_t>(row)]; };
  for (int64_t start = 0, end = 0; start < batch.rows(); start = end) {
    end = start + 1;
    while (end < batch.rows() && seq(end) == seq(start) && pos(end) == pos(end - 1) + 1) ++end;
    const int64_t queries = (end - start) * group;
    for (int64_t first = 0; first < queries; first += lanes) {
      const int count = static_cast<int>(std::min<int64_t>(lanes, queries - first));
      const int32_t top = pos(start + (first + count - 1) / group);
      tiles.push_back({start, first, count, top - first_seen(pos(start + first / group), shape) + 1});
    }
  }
  // Longest first, so the dynamic schedule ends on short tiles and threads finish together.
  std::stable_sort(tiles.begin(), tiles.end(), [](const TileItem& a, const TileItem& b) { return a.cost > b.cost; });
  return tiles;
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
                     const AttentionShape& shape, float* out, ThreadPool& pool) {
  const int64_t hd = shape.head_dim, kv_heads = shape.num_kv_heads, group = shape.num_heads / kv_heads;
  const int64_t q_stride = shape.num_heads * hd;
  // Scores go to a base-2 softmax: exp(x / sqrt(d)) = 2^(x * log2(e) / sqrt(d)). A capped
  // score takes log2(e) after its tanh.
  constexpr double kLog2e = 1.4426950408889634;
  const double scale = shape.scale > 0 ? shape.scale : 1.0 / std::sqrt(static_cast<double>(hd));
  const auto q_scale = static_cast<float>(shape.softcap > 0 ? scale / shape.softcap : kLog2e * scale);
  const auto score_cap = static_cast<float>(shape.softcap > 0 ? kLog2e * shape.softcap : 0.0);
  const KernelTable& k = kernels();
  const std::vector<TileItem> tiles = make_tiles(batch, group, shape, k.tile_lanes);
  const int64_t items = static_cast<int64_t>(tiles.size()) * kv_heads;
  pool.parallel_for_dynamic(items, [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const TileItem& t = tiles[static_cast<size_t>(item / kv_heads)];
      const int64_t kvh = item % kv_heads;
      const int32_t seq = batch.seq_index[static_cast<size_t>(t.run_row)];
      TileQuery queries[kMaxTileLanes];
      for (int i = 0; i < t.count; ++i) {
        const int64_t row = t.run_row + (t.query + i) / group, head = kvh * group + (t.query + i) % group;
        const int32_t pos = batch.positions[static_cast<size_t>(row)];
        queries[i] = {q + row * q_stride + head * hd, out + row * q_stride + head * hd, first_seen(pos, shape), pos};
      }
      const HeadCache kv{&cache, at.plane, batch.table(at.group, seq).data(), kvh * hd};
      k.attend_tile(queries, t.count, kv, hd, q_scale, score_cap);
    }
  });
}

}  // namespace orzo::cpu
