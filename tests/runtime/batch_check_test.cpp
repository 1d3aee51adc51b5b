#include "runtime/batch_check.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace orzo {
namespace {

// Layer 0 global, layer 1 sliding over 8 positions: two groups of block tables.
const KvLayout kLayout = KvLayout::of({0, 8}, 64);

BatchBounds bounds() { return BatchBounds{false, 0, -1, 0, 16, 4, &kLayout}; }

// One sequence decoding at position 20: it reads 13-20 in the sliding layer, blocks 3-5.
ForwardBatch decode_at_20(std::vector<int32_t> sliding) {
  ForwardBatch b;
  b.block_tables = {{0, 1, 2, 3, 4, 5}, std::move(sliding)};
  b.kv_groups = 2;
  const int32_t token = 1;
  b.add_chunk(0, &token, 1, 20, true);
  return b;
}

std::string refusal(const ForwardBatch& b) {
  try {
    check_batch(b, bounds());
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(BatchCheck, SlidingTablesMayGiveBackOnlyWhatNoRowReads) {
  ASSERT_EQ(kLayout.windows, (std::vector<int32_t>{0, 8}));
  EXPECT_EQ(refusal(decode_at_20({kNoBlock, kNoBlock, kNoBlock, 9, 10, 11})), "");
  EXPECT_EQ(refusal(decode_at_20({kNoBlock, kNoBlock, kNoBlock, kNoBlock, 10, 11})),
            "forward batch: KV block id -1 out of range");
  ForwardBatch global_given_back = decode_at_20({6, 7, 8, 9, 10, 11});
  global_given_back.block_tables[0][0] = kNoBlock;
  EXPECT_EQ(refusal(global_given_back), "forward batch: KV block id -1 out of range");
}

TEST(BatchCheck, TheGroupsMustBeTheStages) {
  ForwardBatch one_group = decode_at_20({6, 7, 8, 9, 10, 11});
  one_group.kv_groups = 1;
  EXPECT_EQ(refusal(one_group), "forward batch: it has 1 groups of block tables, the stage keeps 2");
  ForwardBatch odd = decode_at_20({6, 7, 8, 9, 10, 11});
  odd.block_tables.push_back({0});
  EXPECT_EQ(refusal(odd), "forward batch: 3 block tables are not 2 per sequence");
  ForwardBatch short_sliding = decode_at_20({6, 7, 8, 9, 10});
  EXPECT_EQ(refusal(short_sliding), "forward batch: position 20 of row 0 is outside its block table");
}

}  // namespace
}  // namespace orzo
