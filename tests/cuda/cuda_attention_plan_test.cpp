// The host-side plans of GPU attention, which need no GPU: how a step's rows are cut into
// prefill tiles, and how many splits a decode step takes.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/attention.hpp"

namespace orzo {
namespace {

using cuda::AttentionTile;
using cuda::kPrefillTileRows;
using cuda::plan_prefill_tiles;

ForwardBatch batch_of(const std::vector<int32_t>& seqs, const std::vector<int32_t>& positions) {
  ForwardBatch b;
  b.seq_index = seqs;
  b.positions = positions;
  b.tokens.assign(positions.size(), 0);
  return b;
}

std::vector<std::pair<int32_t, int32_t>> spans(const std::vector<AttentionTile>& tiles) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const AttentionTile& t : tiles) out.emplace_back(t.first_row, t.count);
  return out;
}

// What every plan must satisfy: tiles in row order covering each row once, each at most
// kPrefillTileRows rows of one sequence at consecutive positions, padding rows alone.
void expect_valid(const ForwardBatch& b, const std::vector<AttentionTile>& tiles) {
  int32_t next = 0;
  for (const AttentionTile& t : tiles) {
    ASSERT_EQ(t.first_row, next) << "rows skipped or covered twice";
    ASSERT_GE(t.count, 1);
    ASSERT_LE(t.count, kPrefillTileRows);
    for (int32_t r = t.first_row + 1; r < t.first_row + t.count; ++r) {
      const auto i = static_cast<size_t>(r);
      EXPECT_EQ(b.seq_index[i], b.seq_index[i - 1]) << "row " << r;
      EXPECT_EQ(b.positions[i], b.positions[i - 1] + 1) << "row " << r;
      EXPECT_GE(b.positions[i - 1], 0) << "padding row " << r - 1 << " shares a tile";
    }
    next = t.first_row + t.count;
  }
  EXPECT_EQ(next, b.rows());
}

TEST(CudaAttentionPlan, LongChunksSplitIntoFullTiles) {
  ForwardBatch b;
  const std::vector<int32_t> tokens(37, 0);
  b.add_chunk(0, tokens.data(), 37, 100, true);
  const auto tiles = plan_prefill_tiles(b);
  EXPECT_EQ(spans(tiles), (std::vector<std::pair<int32_t, int32_t>>{{0, 16}, {16, 16}, {32, 5}}));
  expect_valid(b, tiles);
}

TEST(CudaAttentionPlan, SequencesNeverShareATile) {
  // Sequence 1 continues sequence 0's positions: only the sequence index tells them apart.
  const ForwardBatch b = batch_of({0, 0, 0, 1, 1, 2}, {4, 5, 6, 7, 8, 9});
  const auto tiles = plan_prefill_tiles(b);
  EXPECT_EQ(spans(tiles), (std::vector<std::pair<int32_t, int32_t>>{{0, 3}, {3, 2}, {5, 1}}));
  expect_valid(b, tiles);
}

TEST(CudaAttentionPlan, PositionGapsBreakTiles) {
  const ForwardBatch b = batch_of({0, 0, 0, 0, 0, 0, 0}, {0, 1, 2, 5, 6, 6, 5});
  const auto tiles = plan_prefill_tiles(b);
  EXPECT_EQ(spans(tiles), (std::vector<std::pair<int32_t, int32_t>>{{0, 3}, {3, 2}, {5, 1}, {6, 1}}));
  expect_valid(b, tiles);
}

TEST(CudaAttentionPlan, PaddingRowsStandAlone) {
  // -2, -1 would look consecutive; a padding row attends to nothing and joins no tile.
  const ForwardBatch b = batch_of({0, 0, 0, 0, 0}, {-2, -1, 0, -1, -1});
  const auto tiles = plan_prefill_tiles(b);
  EXPECT_EQ(spans(tiles), (std::vector<std::pair<int32_t, int32_t>>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  expect_valid(b, tiles);
}

TEST(CudaAttentionPlan, DecodeRowsAreTilesOfOne) {
  const ForwardBatch b = batch_of({3, 1, 2, 0}, {17, 0, 999, 4});
  EXPECT_EQ(spans(plan_prefill_tiles(b)), (std::vector<std::pair<int32_t, int32_t>>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
}

TEST(CudaAttentionPlan, RandomBatchesCoverEveryRowOnce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    ForwardBatch b;
    const int runs = std::uniform_int_distribution<int>(0, 12)(rng);
    for (int r = 0; r < runs; ++r) {
      const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
      const int32_t seq = std::uniform_int_distribution<int32_t>(0, 3)(rng);
      const int32_t count = kind == 0 ? 1 : std::uniform_int_distribution<int32_t>(1, 70)(rng);
      const int32_t first = kind == 3 ? -1 : std::uniform_int_distribution<int32_t>(0, 500)(rng);
      const std::vector<int32_t> tokens(static_cast<size_t>(count), 0);
      if (kind == 3) {  // padding rows
        for (int32_t i = 0; i < count; ++i) b.add_chunk(seq, tokens.data(), 1, -1, false);
      } else {
        b.add_chunk(seq, tokens.data(), count, first, true);
      }
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    expect_valid(b, plan_prefill_tiles(b));
    if (HasFailure()) return;
  }
}

TEST(CudaAttentionPlan, EmptyBatchHasNoTiles) { EXPECT_TRUE(plan_prefill_tiles(ForwardBatch{}).empty()); }

TEST(CudaAttentionPlan, MismatchedRowArraysAreRefused) {
  ForwardBatch b = batch_of({0, 0}, {0, 1});
  b.seq_index.pop_back();
  EXPECT_THROW(plan_prefill_tiles(b), std::invalid_argument);
}

TEST(CudaAttentionPlan, DecodeSplitsFillTheDeviceWithinLimits) {
  // One row of 8 KV heads on 132 SMs wants 4 * 132 / 8 = 66 splits; capped at 32, and only
  // where the context gives each at least kMinSplitPositions positions.
  EXPECT_EQ(cuda::decode_splits(1, 8, 132, 100000), cuda::kMaxDecodeSplits);
  EXPECT_EQ(cuda::decode_splits(1, 8, 132, 10 * cuda::kMinSplitPositions), 10);
  EXPECT_EQ(cuda::decode_splits(1, 8, 132, 10 * cuda::kMinSplitPositions - 1), 9);
  EXPECT_EQ(cuda::decode_splits(1, 8, 132, cuda::kMinSplitPositions - 1), 1);
  EXPECT_EQ(cuda::decode_splits(1, 8, 132, 0), 1);
  // Enough rows fill the device without splitting: 4 * 132 / (64 * 8) rounds up to 2.
  EXPECT_EQ(cuda::decode_splits(64, 8, 132, 100000), 2);
  EXPECT_EQ(cuda::decode_splits(256, 8, 132, 100000), 1);
  EXPECT_EQ(cuda::decode_splits(0, 8, 132, 100000), 1);
  for (int32_t rows : {1, 3, 17, 100})
    for (int32_t context : {1, 255, 256, 513, 4000, 70000}) {
      const int32_t s = cuda::decode_splits(rows, 2, 78, context);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, cuda::kMaxDecodeSplits);
      if (s > 1) {
        EXPECT_GE(context / s, cuda::kMinSplitPositions) << rows << " rows, context " << context;
      }
    }
}

TEST(CudaAttentionPlan, DecodeSplitsRefuseBadShapes) {
  EXPECT_THROW(cuda::decode_splits(-1, 8, 132, 10), std::invalid_argument);
  EXPECT_THROW(cuda::decode_splits(1, 0, 132, 10), std::invalid_argument);
  EXPECT_THROW(cuda::decode_splits(1, 8, 0, 10), std::invalid_argument);
  EXPECT_THROW(cuda::decode_splits(1, 8, 132, -1), std::invalid_argument);
}

// The scratch of a split-K decode: none for one split, every split's state for more.
TEST(CudaAttentionPlan, DecodeWorkspaceScalesWithSplits) {
  EXPECT_EQ(cuda::decode_workspace_bytes(7, 32, 128, 1), 0u);  // one split writes the output directly
  const size_t two = cuda::decode_workspace_bytes(7, 32, 128, 2);
  EXPECT_GE(two, size_t{7} * 32 * 2 * 128 * sizeof(float));  // at least the f32 accumulators
  EXPECT_EQ(cuda::decode_workspace_bytes(7, 32, 128, 4), 2 * two);
  EXPECT_EQ(cuda::decode_workspace_bytes(0, 32, 128, 4), 0u);
  EXPECT_THROW(cuda::decode_workspace_bytes(-1, 32, 128, 4), std::invalid_argument);
  EXPECT_THROW(cuda::decode_workspace_bytes(7, 32, 128, -4), std::invalid_argument);
}

}  // namespace
}  // namespace orzo
