// paged_attention against a double-precision softmax(q·kᵀ/√d)·v computed position by
// position, over batches that mix prefill chunks and decode rows of sequences whose blocks
// are scattered through the cache; a sequence's results, which must not change with the
// rest of the batch or with how its own prompt is chunked; and the exponential under it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/exp2.hpp"
#include "tests/support/each_isa.hpp"

namespace orzo {
namespace {

using cpu::AttentionShape;

constexpr int64_t kKvHeads = 2, kLayers = 2, kLayer = 1;

struct Sequence {
  int32_t length;  // positions whose K/V are in the cache
  int32_t rows;    // the batch holds its last `rows` positions (1: a decode row)
};

// Sequences with random K/V for all their positions, each owning blocks spread at random
// over a cache shared with the others. With `rounded`, each key and value is the nearest
// f16, stored as f16 (`dtype` F16) or as that value in f32.
class Cache {
 public:
  Cache(const std::vector<Sequence>& seqs, int32_t block_size, int64_t head_dim, uint32_t seed,
        DType dtype = DType::F32, bool rounded = false)
      : seqs_(seqs), cache_(kLayers, total_blocks(seqs, block_size), block_size, kKvHeads * head_dim, dtype) {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(static_cast<size_t>(cache_.num_blocks()));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    auto next = ids.begin();
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (const Sequence& s : seqs) {
      const int32_t blocks = (s.length + block_size - 1) / block_size;
      tables_.emplace_back(next, next + blocks);
      next += blocks;
      for (int32_t p = 0; p < s.length; ++p) {
        const int32_t block = tables_.back()[static_cast<size_t>(p / block_size)];
        std::vector<float> key(static_cast<size_t>(cache_.kv_dim())), value(key.size());
        std::vector<uint16_t> key16(key.size()), value16(key.size());
        for (size_t i = 0; i < key.size(); ++i) {
          key[i] = uniform(rng);
          value[i] = uniform(rng);
          key16[i] = f32_to_f16(key[i]);
          value16[i] = f32_to_f16(value[i]);
          if (rounded) {
            key[i] = f16_to_f32(key16[i]);
            value[i] = f16_to_f32(value16[i]);
          }
        }
        if (dtype == DType::F16)
          cache_.write(kLayer, block, p % block_size, key16.data(), value16.data());
        else
          cache_.write(kLayer, block, p % block_size, key.data(), value.data());
      }
    }
  }

  KvCache& kv() { return cache_; }

  // A batch of runs: `count` rows of sequence `seq` from position `first`.
  struct Run {
    int32_t seq, first, count;
  };
  ForwardBatch batch_of(const std::vector<Run>& runs) const {
    ForwardBatch b;
    b.block_tables = tables_;
    for (const Run& r : runs) {
      const std::vector<int32_t> tokens(static_cast<size_t>(r.count), 0);
      b.add_chunk(r.seq, tokens.data(), r.count, r.first, false);
    }
    return b;
  }

  // The batch rows of the listed sequences, in `chunk`-row runs, sequence by sequence.
  ForwardBatch batch(const std::vector<int32_t>& order, int32_t chunk = 1 << 30) const {
    std::vector<Run> runs;
    for (int32_t s : order) {
      const Sequence& seq = seqs_[static_cast<size_t>(s)];
      for (int32_t p = seq.length - seq.rows; p < seq.length; p += chunk) runs.push_back({s, p, std::min(chunk, seq.length - p)});
    }
    return batch_of(runs);
  }

 private:
  static int32_t total_blocks(const std::vector<Sequence>& seqs, int32_t block_size) {
    int32_t n = 0;
    for (const Sequence& s : seqs) n += (s.length + block_size - 1) / block_size;
    return n;
  }

  std::vector<Sequence> seqs_;
  KvCache cache_;
  std::vector<std::vector<int32_t>> tables_;
};

// Queries large enough that softmax is far from uniform, so masking errors show.
std::vector<float> random_queries(const ForwardBatch& b, const AttentionShape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> q(static_cast<size_t>(b.rows() * shape.num_heads * shape.head_dim));
  for (auto& x : q) x = uniform(rng);
  return q;
}

std::vector<double> reference(const std::vector<float>& q, const ForwardBatch& b, KvCache& cache,
                              const AttentionShape& shape) {
  const int64_t hd = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const int32_t bs = cache.block_size();
  std::vector<double> out(q.size());
  for (int64_t row = 0; row < b.rows(); ++row) {
    const int32_t pos = b.positions[static_cast<size_t>(row)];
    const auto& table = b.block_tables[static_cast<size_t>(b.seq_index[static_cast<size_t>(row)])];
    const int32_t first = shape.sliding_window ? std::max<int32_t>(0, pos - static_cast<int32_t>(*shape.sliding_window) + 1) : 0;
    for (int64_t h = 0; h < shape.num_heads; ++h) {
      const float* qh = q.data() + (row * shape.num_heads + h) * hd;
      const int64_t offset = (h / group) * hd;
      std::vector<double> scores;
      for (int32_t p = first; p <= pos; ++p) {
        const int32_t block = table[static_cast<size_t>(p / bs)];
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(qh[d]) * cache.key(kLayer, block, p % bs, offset + d);
        scores.push_back(dot / std::sqrt(static_cast<double>(hd)));
      }
      const double max_s = *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (double& s : scores) sum += s = std::exp(s - max_s);
      double* o = out.data() + (row * shape.num_heads + h) * hd;
      for (int32_t p = first; p <= pos; ++p) {
        const int32_t block = table[static_cast<size_t>(p / bs)];
        for (int64_t d = 0; d < hd; ++d)
          o[d] += scores[static_cast<size_t>(p - first)] / sum * cache.value_at(kLayer, block, p % bs, offset + d);
      }
    }
  }
  return out;
}

std::vector<float> attend(const std::vector<float>& q, const ForwardBatch& b, KvCache& cache,
                          const AttentionShape& shape, ThreadPool& pool, bool split_contexts = false) {
  std::vector<float> out(q.size(), std::nanf(""));
  cpu::paged_attention(q.data(), b, cache, cpu::KvPlace{kLayer, 0}, shape, out.data(), pool, split_contexts);
  return out;
}

// The largest error relative to max(1, |want|); NaN if any output is NaN (an output never
// written stays the NaN attend fills it with), which no bound passes.
double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (!(error <= worst)) worst = error;
  }
  return worst;
}

// The rows of sequence `seq` in batch `b`, in batch order, each num_heads * head_dim wide.
std::vector<float> rows_of(const std::vector<float>& x, const ForwardBatch& b, int32_t seq, const AttentionShape& shape) {
  const int64_t width = shape.num_heads * shape.head_dim;
  std::vector<float> picked;
  for (int64_t row = 0; row < b.rows(); ++row)
    if (b.seq_index[static_cast<size_t>(row)] == seq)
      picked.insert(picked.end(), x.begin() + row * width, x.begin() + (row + 1) * width);
  return picked;
}

// Queries `q` of batch `b` with the rows of `seq` replaced by `from_rows`, in order.
std::vector<float> with_rows_of(std::vector<float> q, const ForwardBatch& b, const std::vector<float>& from_rows,
                                int32_t seq, const AttentionShape& shape) {
  const int64_t width = shape.num_heads * shape.head_dim;
  auto next = from_rows.begin();
  for (int64_t row = 0; row < b.rows(); ++row)
    if (b.seq_index[static_cast<size_t>(row)] == seq) {
      std::copy(next, next + width, q.begin() + row * width);
      next += width;
    }
  return q;
}

TEST(AttentionExp2, MatchesLibmToFloatRounding) {
  orzo::testing::for_each_isa([&] {
    std::vector<float> x;
    for (float v = -126.0f; v <= 0.0f; v += 0.0137f) x.push_back(v);
    std::vector<float> y = x;
    cpu::exp2_inplace(y.data(), static_cast<int64_t>(y.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp2(static_cast<double>(x[i]));
      EXPECT_LE(std::abs(y[i] - want), 2e-7 * want) << "2^" << x[i];
    }
  });
}

// Softmax leans on these: masked scores (-inf) weigh exactly 0, and an unchanged running
// maximum rescales by exactly 1.
TEST(AttentionExp2, ExactAtTheEnds) {
  orzo::testing::for_each_isa([&] {
    float x[] = {-std::numeric_limits<float>::infinity(), -127.0f, -1000.0f, 0.0f};
    cpu::exp2_inplace(x, 4);
    EXPECT_EQ(x[0], 0.0f);
    EXPECT_EQ(x[1], 0.0f);
    EXPECT_EQ(x[2], 0.0f);
    EXPECT_EQ(x[3], 1.0f);
  });
}

// group, head_dim, sliding window (0: none), block size
using Param = std::tuple<int64_t, int64_t, int32_t, int32_t>;

class PagedAttention : public ::testing::TestWithParam<Param> {
 protected:
  AttentionShape shape() const {
    const int64_t group = std::get<0>(GetParam()), head_dim = std::get<1>(GetParam());
    const int32_t window = std::get<2>(GetParam());
    return {group * kKvHeads, kKvHeads, head_dim, window > 0 ? std::optional<int64_t>(window) : std::nullopt};
  }
  int32_t block_size() const { return std::get<3>(GetParam()); }

  // Prefill chunks of several lengths (some not starting at 0, as after a cached prefix)
  // and decode rows, the longest crossing many blocks.
  const std::vector<Sequence> seqs_ = {{70, 70}, {1, 1}, {45, 1}, {33, 12}, {129, 1}, {9, 9}, {200, 37}, {16, 1}};
  ThreadPool pool_{3};
};

TEST_P(PagedAttention, MatchesDoublePrecisionReference) {
  orzo::testing::for_each_isa([&] {
    const AttentionShape s = shape();
    Cache cache(seqs_, block_size(), s.head_dim, 1);
    // Sequence 6 (positions 163..199) comes in two runs with the others' rows between.
    std::vector<Cache::Run> runs = {{6, 163, 20}};
    for (int32_t i = 0; i < static_cast<int32_t>(seqs_.size()); ++i) {
      const Sequence& seq = seqs_[static_cast<size_t>(i)];
      if (i != 6) runs.push_back({i, seq.length - seq.rows, seq.rows});
    }
    runs.push_back({6, 183, 17});
    const ForwardBatch mixed = cache.batch_of(runs);
    const auto q = random_queries(mixed, s, 2);
    const auto out = attend(q, mixed, cache.kv(), s, pool_);
    EXPECT_LT(worst_error(out, reference(q, mixed, cache.kv(), s)), 1e-5);
  });
}

TEST_P(PagedAttention, SequenceResultsDoNotDependOnTheBatch) {
  orzo::testing::for_each_isa([&] {
    const AttentionShape s = shape();
    Cache cache(seqs_, block_size(), s.head_dim, 3);
    const ForwardBatch alone = cache.batch({6});
    const auto q_alone = random_queries(alone, s, 4);
    const auto out_alone = attend(q_alone, alone, cache.kv(), s, pool_);

    const ForwardBatch together = cache.batch({3, 1, 6, 0, 4, 2, 5, 7});
    const auto q_together = with_rows_of(random_queries(together, s, 5), together, q_alone, 6, s);
    EXPECT_EQ(rows_of(attend(q_together, together, cache.kv(), s, pool_), together, 6, s), out_alone);

    // The same rows as a prompt prefilled in pieces of 7 and 5, and one at a time, as
    // decode: each piece a step of its own, since a batch's rows of one sequence at
    // consecutive positions form one run whatever chunks they came in. Other tiles, lanes,
    // tile widths and tile starts, which attention_tile.hpp keeps exact.
    const Sequence& seq = seqs_[6];
    const int64_t width = s.num_heads * s.head_dim;
    for (int32_t chunk : {7, 5, 1}) {
      std::vector<float> pieces;
      for (int32_t p = seq.length - seq.rows; p < seq.length; p += chunk) {
        const int32_t n = std::min(chunk, seq.length - p);
        const ForwardBatch step = cache.batch_of({{6, p, n}});
        const auto q = q_alone.begin() + (p - (seq.length - seq.rows)) * width;
        const auto out = attend(std::vector<float>(q, q + n * width), step, cache.kv(), s, pool_);
        pieces.insert(pieces.end(), out.begin(), out.end());
      }
      EXPECT_EQ(pieces, out_alone) << "steps of " << chunk;
    }
  });
}

// An f16 cache widens each chunk to f32 and runs the f32 arithmetic on it: its results are
// the f32 cache's, bit for bit, when that holds the same (f16-rounded) values. The rows come
// as in MatchesDoublePrecisionReference, and again as decode steps.
TEST_P(PagedAttention, HalfCacheGivesTheF32CacheResultsOfItsValues) {
  orzo::testing::for_each_isa([&] {
    const AttentionShape s = shape();
    Cache half(seqs_, block_size(), s.head_dim, 6, DType::F16, true);
    Cache full(seqs_, block_size(), s.head_dim, 6, DType::F32, true);
    const ForwardBatch all = half.batch({3, 1, 6, 0, 4, 2, 5, 7}, 5);
    const auto q = random_queries(all, s, 7);
    EXPECT_EQ(attend(q, all, half.kv(), s, pool_), attend(q, all, full.kv(), s, pool_));
    EXPECT_LT(worst_error(attend(q, all, half.kv(), s, pool_), reference(q, all, half.kv(), s)), 1e-5);
    const ForwardBatch decode = half.batch({6, 2}, 1);
    const auto qd = random_queries(decode, s, 8);
    EXPECT_EQ(attend(qd, decode, half.kv(), s, pool_), attend(qd, decode, full.kv(), s, pool_));
  });
}

// A few decode rows at long contexts leave most threads idle, one tile a KV head each: with
// split_contexts their positions are split into pieces that run on every thread and are
// merged. The merged results match the reference as the whole pass does; they differ from the
// whole pass only by rounding (at least one bit somewhere, or nothing was split); prefill
// rows and short rows never split, so theirs stay bit for bit; and sliding windows, an f16
// cache and every ISA level take the same path.
TEST(PagedAttentionSplit, LongDecodeRowsSplitAcrossThreadsAndMergeToTheWholeResult) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(4);
    for (int32_t window : {0, 1100})
      for (DType dtype : {DType::F32, DType::F16}) {
        const AttentionShape s{4 * kKvHeads, kKvHeads, 64, window > 0 ? std::optional<int64_t>(window) : std::nullopt};
        const std::vector<Sequence> seqs = {{3000, 1}, {1700, 1}, {40, 1}, {300, 8}};
        Cache cache(seqs, 16, s.head_dim, 11, dtype, true);
        const ForwardBatch b = cache.batch({0, 1, 2, 3});
        const auto q = random_queries(b, s, 12);
        const auto whole = attend(q, b, cache.kv(), s, pool);
        const auto split = attend(q, b, cache.kv(), s, pool, true);
        const auto want = reference(q, b, cache.kv(), s);
        EXPECT_LT(worst_error(whole, want), 1e-5);
        EXPECT_LT(worst_error(split, want), 1e-5) << "window " << window;
        EXPECT_NE(rows_of(split, b, 0, s), rows_of(whole, b, 0, s)) << "window " << window;
        for (int32_t seq : {2, 3}) EXPECT_EQ(rows_of(split, b, seq, s), rows_of(whole, b, seq, s)) << "sequence " << seq;
        // One thread has nothing to spread the pieces over.
        ThreadPool alone(1);
        EXPECT_EQ(attend(q, b, cache.kv(), s, alone, true), whole);
      }
  });
}

// One sequence's decode row is one tile a KV head: SmolLM2's 3 on 2 threads would leave one
// thread idle for a third of the call at any context, so its positions split into pieces
// that spread evenly (2 each, 6 in all) once each piece keeps 64 positions. KV heads the
// threads share out evenly, and contexts too short for such pieces, run whole.
TEST(PagedAttentionSplit, FewDecodeTilesSplitToEvenTheThreadsOut) {
  orzo::testing::for_each_isa([&] {
    ThreadPool two(2);
    for (const auto& [kv_heads, context, splits] :
         {std::tuple{3, 256, true}, std::tuple{3, 127, false}, std::tuple{4, 256, false}, std::tuple{4, 2048, true}}) {
      const AttentionShape s{3 * kv_heads, kv_heads, 64, std::nullopt};
      Cache cache({{context, 1}}, 16, kv_heads * s.head_dim / kKvHeads, 15);  // kKvHeads columns' worth of kv_heads heads
      const ForwardBatch b = cache.batch({0});
      const auto q = random_queries(b, s, 16);
      const auto whole = attend(q, b, cache.kv(), s, two);
      const auto split = attend(q, b, cache.kv(), s, two, true);
      EXPECT_LT(worst_error(split, reference(q, b, cache.kv(), s)), 1e-5);
      EXPECT_EQ(split != whole, splits) << kv_heads << " KV heads at " << context << " positions";
    }
  });
}

// Nine threads over one KV head ask for 36 pieces of 513 of these 18,468 positions; rounded
// up to 16 (528) without recounting them, 35 pieces would cover all and leave the last empty.
TEST(PagedAttentionSplit, PiecesRoundedToSixteenPositionsEachSeeSomething) {
  ThreadPool many(9);
  const AttentionShape s{2, 1, 16, std::nullopt};
  Cache cache({{18468, 1}}, 16, s.head_dim, 13);
  const ForwardBatch b = cache.batch({0});
  const auto q = random_queries(b, s, 14);
  const auto split = attend(q, b, cache.kv(), s, many, true);
  EXPECT_LT(worst_error(split, reference(q, b, cache.kv(), s)), 1e-5);
  EXPECT_NE(split, attend(q, b, cache.kv(), s, many));
}

TEST(KvCache, StoresF16RoundedToNearestAndReadsItBack) {
  KvCache cache(2, 3, 4, 5, DType::F16);
  EXPECT_EQ(cache.bytes(), 2u * 2 * 3 * 4 * 5 * 2);
  EXPECT_EQ(KvCache::bytes_per_block_plane(16, 64, DType::F16) * 2, KvCache::bytes_per_block_plane(16, 64, DType::F32));
  const float key[] = {1.0f, -2.5f, 65504.0f, 1e-8f, 0.1f}, value[] = {3.0f, 70000.0f, -0.0f, 6e-5f, 1.0f / 3};
  ThreadPool pool(1);
  orzo::testing::for_each_isa([&] {
    cpu::store_kv(cache, 1, 2, 3, key, value);
    for (int64_t i = 0; i < 5; ++i) {
      EXPECT_EQ(cache.key(1, 2, 3, i), f16_to_f32(f32_to_f16(key[i]))) << i;
      EXPECT_EQ(cache.value_at(1, 2, 3, i), f16_to_f32(f32_to_f16(value[i]))) << i;
    }
  });
  EXPECT_EQ(cache.key(1, 2, 3, 0), 1.0f);
  EXPECT_EQ(cache.value_at(1, 2, 3, 1), std::numeric_limits<float>::infinity());  // past f16's range, as llama.cpp's
  EXPECT_EQ(cache.key(0, 2, 3, 0), 0.0f);  // other planes untouched
  EXPECT_THROW(KvCache(1, 1, 16, 8, DType::BF16), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttention,
                         ::testing::Combine(::testing::Values<int64_t>(1, 2, 4, 12), ::testing::Values<int64_t>(8, 16, 64, 128),
                                            ::testing::Values(0, 19), ::testing::Values(16)));
// Block sizes around the 16-key chunks, and a head_dim that is not a multiple of 64.
INSTANTIATE_TEST_SUITE_P(BlockSizes, PagedAttention,
                         ::testing::Combine(::testing::Values<int64_t>(4), ::testing::Values<int64_t>(80),
                                            ::testing::Values(0, 19), ::testing::Values(1, 8, 24, 32)));
// Heads whose width leaves 4- and 1-column remainders (16 + 16 + 4, 8 + 4 + 1) after the
// vectors the values are summed in.
INSTANTIATE_TEST_SUITE_P(OddHeads, PagedAttention,
                         ::testing::Combine(::testing::Values<int64_t>(2, 3), ::testing::Values<int64_t>(36, 13),
                                            ::testing::Values(0), ::testing::Values(16)));

}  // namespace
}  // namespace orzo
