#include "batching/block_set.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

namespace orzo {
namespace {

// Every query of `set` answered as the ordered set `want` answers it.
void expect_same(const BlockSet& set, const std::set<int32_t>& want, int32_t n) {
  ASSERT_EQ(set.size(), static_cast<int32_t>(want.size()));
  EXPECT_EQ(set.empty(), want.empty());
  std::vector<int32_t> listed;
  set.for_each([&](int32_t id) { listed.push_back(id); });
  EXPECT_EQ(listed, std::vector<int32_t>(want.begin(), want.end()));
  for (int32_t from = 0; from <= n + 1; ++from) {
    const auto it = want.lower_bound(from);
    ASSERT_EQ(set.lowest_from(from), it == want.end() ? -1 : *it) << "from " << from;
    // Above from - 1, else the lowest.
    const int32_t above = it != want.end() ? *it : want.empty() ? -1 : *want.begin();
    ASSERT_EQ(set.lowest_above(from - 1), above) << "above " << from - 1;
  }
  for (int32_t id = 0; id < n; ++id) ASSERT_EQ(set.contains(id), want.count(id) == 1) << id;
}

TEST(BlockSet, StartsFullOrEmptyAtEverySize) {
  // Sizes around a word (64 ids) and a summary word (4,096 ids).
  for (int32_t n : {0, 1, 63, 64, 65, 4095, 4096, 4097, 8192 + 70}) {
    std::set<int32_t> want;
    expect_same(BlockSet(n, false), want, n);
    for (int32_t id = 0; id < n; ++id) want.insert(id);
    expect_same(BlockSet(n, true), want, n);
  }
  EXPECT_THROW(BlockSet(-1, true), std::invalid_argument);
}

TEST(BlockSet, FindsTheNextFreeIdAcrossEmptyWordsAndSummaryWords) {
  const int32_t n = 3 * 4096 + 100;
  BlockSet free(n, true);
  for (int32_t id = 0; id < n; ++id) free.erase(id);
  expect_same(free, {}, n);
  // Alone in the pool, at the edges of words and of summary words.
  for (int32_t id : {0, 63, 64, 4095, 4096, 2 * 4096 + 1, n - 1}) {
    free.insert(id);
    expect_same(free, {id}, n);
    free.erase(id);
  }
  free.insert(5);
  free.insert(n - 1);
  EXPECT_EQ(free.lowest_from(6), n - 1);
  EXPECT_EQ(free.lowest_from(n), -1);
}

TEST(BlockSet, AgreesWithAnOrderedSetUnderRandomChanges) {
  const int32_t n = 4096 + 300;
  BlockSet free(n, true);
  std::set<int32_t> want;
  for (int32_t id = 0; id < n; ++id) want.insert(id);
  std::mt19937 rng(3);
  for (int round = 0; round < 40; ++round) {
    // Long runs of erases, then of inserts, so that whole words and summary words empty.
    const bool erasing = round % 2 == 0;
    for (int k = 0; k < 3000; ++k) {
      const auto id = static_cast<int32_t>(rng() % static_cast<uint32_t>(n));
      if (erasing && want.count(id)) {
        free.erase(id);
        want.erase(id);
      } else if (!erasing && !want.count(id)) {
        free.insert(id);
        want.insert(id);
      }
    }
    expect_same(free, want, n);
  }
}

}  // namespace
}  // namespace orzo
