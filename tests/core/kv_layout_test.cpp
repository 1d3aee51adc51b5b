#include "core/kv_layout.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace orzo {
namespace {

// Gemma 3's pattern: five sliding layers, then a global one.
std::vector<int64_t> gemma3_windows(int64_t layers, int64_t window) {
  std::vector<int64_t> w;
  for (int64_t l = 0; l < layers; ++l) w.push_back(l % 6 == 5 ? 0 : window);
  return w;
}

TEST(KvLayout, StaysFlatWhereSlidingLayersSaveNothing) {
  for (const auto& windows : {std::vector<int64_t>{0, 0, 0}, std::vector<int64_t>{64, 64, 64},  // none sliding; none global
                              std::vector<int64_t>{64, 0, 64}}) {                               // windows as long as the context
    const KvLayout layout = KvLayout::of(windows, windows == std::vector<int64_t>{64, 0, 64} ? 64 : 4096);
    EXPECT_EQ(layout.windows, std::vector<int32_t>{0});
    EXPECT_EQ(layout.group_of, (std::vector<int32_t>{0, 0, 0}));
    EXPECT_EQ(layout.plane_of, (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(layout.planes_for(0, 3), 3);
  }
}

TEST(KvLayout, DealsLayersIntoGroupsOfTheGlobalCount) {
  // Gemma 3 270M: 18 layers, 3 global (5, 11, 17), 15 sliding in five groups of three.
  const KvLayout layout = KvLayout::of(gemma3_windows(18, 512), 32768);
  EXPECT_EQ(layout.windows, (std::vector<int32_t>{0, 512, 512, 512, 512, 512}));
  EXPECT_EQ(layout.group_of, (std::vector<int32_t>{1, 1, 1, 2, 2, 0, 2, 3, 3, 3, 4, 0, 4, 4, 5, 5, 5, 0}));
  EXPECT_EQ(layout.plane_of, (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 2, 0, 1, 2, 0, 1, 1, 2, 0, 1, 2, 2}));
  EXPECT_EQ(layout.planes_for(0, 18), 3);

  // Gemma 3 1B: 26 layers, 4 global; 22 sliding deal into five groups of four and one of two.
  const KvLayout one_b = KvLayout::of(gemma3_windows(26, 512), 32768);
  ASSERT_EQ(one_b.groups(), 7);
  EXPECT_EQ(one_b.planes_for(0, 26), 4);
  int32_t in_last = 0;
  for (auto g : one_b.group_of) in_last += g == 6;
  EXPECT_EQ(in_last, 2);
}

TEST(KvLayout, AStageNumbersItsOwnPlanes) {
  const KvLayout layout = KvLayout::of(gemma3_windows(18, 512), 32768);
  // Layers 4-8: group 2 holds 4 and 6 (planes 1, 2 of the model's), group 0 holds 5, group 3 holds 7 and 8.
  EXPECT_EQ(layout.planes_in(4, 9), (std::vector<int32_t>{0, 0, 1, 0, 1}));
  EXPECT_EQ(layout.planes_for(4, 9), 2);
  EXPECT_EQ(layout.planes_for(5, 6), 1);
}

TEST(KvLayout, FirstBlockReadAndBlocksPerSequence) {
  EXPECT_EQ(first_block_read(0, 1000, 16), 0);
  EXPECT_EQ(first_block_read(512, 511, 16), 0);
  EXPECT_EQ(first_block_read(512, 512, 16), 0);   // sees 1-512
  EXPECT_EQ(first_block_read(512, 527, 16), 1);   // sees 16-527
  EXPECT_EQ(first_block_read(512, 528, 16), 1);   // sees 17-528
  EXPECT_EQ(first_block_read(1, 33, 16), 2);
  // Flat: every position. One sliding group of 32: a decode row reaches back over 3 blocks at
  // most; a chunk of 64 rows over 7; never more than the sequence has.
  EXPECT_EQ(blocks_for_tokens({0}, 1000, 16, 64), 63);
  EXPECT_EQ(blocks_for_tokens({0, 32}, 1000, 16, 1), 63 + 3);
  EXPECT_EQ(blocks_for_tokens({0, 32}, 1000, 16, 64), 63 + 7);
  EXPECT_EQ(blocks_for_tokens({0, 32}, 20, 16, 64), 2 + 2);
}

}  // namespace
}  // namespace orzo
