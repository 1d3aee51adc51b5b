// The shapes decode graphs are captured for: pure host logic, tested without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/cuda/decode_graphs.hpp"

namespace orzo::cuda {
namespace {

TEST(CudaDecodeGraphs, BatchSizesAreSmallPowersThenMultiplesOfEightUpToTheMost) {
  EXPECT_EQ(graph_batch_sizes(1), (std::vector<int32_t>{1}));
  EXPECT_EQ(graph_batch_sizes(3), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(graph_batch_sizes(20), (std::vector<int32_t>{1, 2, 4, 8, 16, 20}));
  EXPECT_EQ(graph_batch_sizes(32), (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32}));
}

TEST(CudaDecodeGraphs, EveryBatchGetsTheSmallestSizeThatHoldsIt) {
  for (int32_t most : {1, 3, 20, 64, 256}) {
    const auto sizes = graph_batch_sizes(most);
    for (int32_t rows = 1; rows <= most; ++rows) {
      const int32_t size = graph_batch_size(rows, most);
      ASSERT_GE(size, rows) << rows << " of " << most;
      ASSERT_LE(size, most);
      // No smaller size in the list holds the batch.
      for (int32_t s : sizes) ASSERT_FALSE(s >= rows && s < size) << rows << " of " << most;
    }
    EXPECT_EQ(graph_batch_size(most + 1, most), 0);
    EXPECT_EQ(graph_batch_size(0, most), 0);
  }
}

TEST(CudaDecodeGraphs, TableStridesArePowersOfTwoFromEight) {
  EXPECT_EQ(graph_table_stride(1), 8);
  EXPECT_EQ(graph_table_stride(8), 8);
  EXPECT_EQ(graph_table_stride(9), 16);
  EXPECT_EQ(graph_table_stride(1000), 1024);
}

}  // namespace
}  // namespace orzo::cuda
