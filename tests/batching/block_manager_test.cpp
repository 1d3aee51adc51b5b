#include "batching/block_manager.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace orzo {

// Reaches into the private state to break one invariant at a time.
struct BlockManagerTestPeer {
  static BlockSet& free_set(BlockManager& bm) { return bm.free_; }
  static BlockSet& cold_set(BlockManager& bm) { return bm.cold_; }
  static std::unordered_map<uint64_t, int32_t>& index(BlockManager& bm) { return bm.index_; }
  static int32_t& lru_prev(BlockManager& bm, int32_t id) { return bm.blocks_[static_cast<size_t>(id)].lru_prev; }
  static int32_t& refcount(BlockManager& bm, int32_t id) { return bm.blocks_[static_cast<size_t>(id)].refcount; }
};

namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> iota_tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Allocates, "computes" every position and commits, as a step would.
SequenceBlocks computed(BlockManager& bm, const std::vector<int32_t>& tokens) {
  SequenceBlocks seq;
  const auto n = static_cast<int32_t>(tokens.size());
  bm.take_cached_prefix(seq, tokens.data(), n);
  EXPECT_TRUE(bm.allocate(seq, n));
  bm.commit(seq, tokens.data(), n);
  return seq;
}

TEST(BlockManager, AllocateAndReleaseAccounting) {
  BlockManager bm(10, kBs);
  EXPECT_EQ(bm.num_free(), 10);
  SequenceBlocks a, b;
  ASSERT_TRUE(bm.allocate(a, 9));  // 3 blocks
  EXPECT_EQ(a.table.size(), 3u);
  EXPECT_EQ(bm.num_used(), 3);
  ASSERT_TRUE(bm.allocate(a, 12));  // still 3
  EXPECT_EQ(a.table.size(), 3u);
  ASSERT_TRUE(bm.allocate(a, 13));
  EXPECT_EQ(a.table.size(), 4u);
  ASSERT_TRUE(bm.allocate(b, 1));
  EXPECT_EQ(bm.num_used(), 5);
  EXPECT_NE(a.table[0], b.table[0]);
  bm.check({&a, &b});
  bm.release(a);
  EXPECT_TRUE(a.table.empty());
  EXPECT_EQ(bm.num_used(), 1);
  bm.check({&a, &b});
  bm.release(b);
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_free(), 10);
  bm.check({});
}

TEST(BlockManager, AllocateIsAllOrNothing) {
  BlockManager bm(4, kBs);
  SequenceBlocks a, b;
  ASSERT_TRUE(bm.allocate(a, 8));
  ASSERT_TRUE(bm.allocate(b, 4));
  EXPECT_FALSE(bm.allocate(b, 13));  // needs 3 more, 1 free
  EXPECT_EQ(b.table.size(), 1u);
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_TRUE(bm.allocate(b, 8));
  EXPECT_FALSE(bm.allocate(b, 9));
  bm.check({&a, &b});
}

TEST(BlockManager, RejectsBadGeometry) {
  EXPECT_THROW(BlockManager(0, 4), std::invalid_argument);
  EXPECT_THROW(BlockManager(4, 0), std::invalid_argument);
}

TEST(BlockManager, SecondSequenceReusesTheSharedPrefix) {
  BlockManager bm(16, kBs);
  std::vector<int32_t> first = iota_tokens(10);  // blocks [0,4) [4,8) full, [8,10) partial
  SequenceBlocks a = computed(bm, first);
  std::vector<int32_t> second = first;
  second.resize(8);
  second.push_back(7);
  second.push_back(7);
  second.push_back(7);
  EXPECT_EQ(bm.cached_prefix_tokens(second.data(), 11), 8);
  SequenceBlocks b;
  EXPECT_EQ(bm.take_cached_prefix(b, second.data(), 11), 8);
  ASSERT_EQ(b.table.size(), 2u);
  EXPECT_EQ(b.table[0], a.table[0]);
  EXPECT_EQ(b.table[1], a.table[1]);
  EXPECT_EQ(b.hashes, std::vector<uint64_t>(a.hashes.begin(), a.hashes.begin() + 2));
  EXPECT_EQ(bm.num_used(), 3);  // shared blocks count once
  ASSERT_TRUE(bm.allocate(b, 11));
  EXPECT_NE(b.table[2], a.table[2]);
  bm.check({&a, &b});
  EXPECT_EQ(bm.stats().prefix_hit_tokens, 8u);
  EXPECT_EQ(bm.stats().prefix_queries, 2u);  // the first sequence's miss counts too
  EXPECT_EQ(bm.stats().prefix_query_tokens, 21u);
  // a differing first block shares nothing, though its second block matches
  std::vector<int32_t> third = first;
  third[0] = 1;
  EXPECT_EQ(bm.cached_prefix_tokens(third.data(), 10), 0);
  // releasing one holder keeps the blocks for the other
  bm.release(a);
  bm.check({&b});
  EXPECT_EQ(bm.num_used(), 3);
}

TEST(BlockManager, ForgetCachedEmptiesThePrefixCache) {
  BlockManager bm(8, kBs);
  const std::vector<int32_t> tokens = iota_tokens(10);
  SequenceBlocks a = computed(bm, tokens);
  EXPECT_THROW(bm.forget_cached(), std::logic_error);  // a still holds its blocks
  bm.release(a);
  ASSERT_EQ(bm.num_cached(), 2);
  ASSERT_EQ(bm.cached_prefix_tokens(tokens.data(), 10), 8);
  bm.forget_cached();
  bm.check({});
  EXPECT_EQ(bm.num_cached(), 0);
  EXPECT_EQ(bm.num_free(), 8);
  EXPECT_EQ(bm.cached_prefix_tokens(tokens.data(), 10), 0);
  // the same prefix computed again is cached again, under fresh registrations
  SequenceBlocks b = computed(bm, tokens);
  bm.release(b);
  EXPECT_EQ(bm.cached_prefix_tokens(tokens.data(), 10), 8);
  bm.check({});
}

TEST(BlockManager, CachedPrefixLeavesTheLastTokensBlockToCompute) {
  BlockManager bm(16, kBs);
  const std::vector<int32_t> tokens = iota_tokens(9);
  SequenceBlocks a = computed(bm, {tokens.begin(), tokens.begin() + 8});  // two full blocks
  EXPECT_EQ(a.hashes.size(), 2u);
  bm.release(a);
  EXPECT_EQ(bm.num_cached(), 2);
  // all 8 cached, but the block of token 7 is left: [0, 7) holds only block 0 entirely
  EXPECT_EQ(bm.cached_prefix_tokens(tokens.data(), 8), 4);
  EXPECT_EQ(bm.cached_prefix_tokens(tokens.data(), 9), 8);  // one more token: both blocks count
  EXPECT_EQ(bm.cached_prefix_tokens(tokens.data(), 5), 4);
  EXPECT_EQ(bm.cached_prefix_tokens(tokens.data(), 4), 0);
  EXPECT_EQ(bm.cached_prefix_tokens(tokens.data(), 1), 0);
  SequenceBlocks b;
  EXPECT_EQ(bm.take_cached_prefix(b, tokens.data(), 8), 4);
  EXPECT_EQ(b.table.size(), 1u);
  EXPECT_EQ(bm.num_cached(), 1);
  bm.check({&b});
}

// Sequences that grow side by side each take the lowest free id above their last block, so
// that every table rises, also through blocks other sequences gave back; past the top free
// id a table goes on from the lowest.
TEST(BlockManager, TablesRiseThroughTheBlockSet) {
  BlockManager bm(12, kBs, false);
  SequenceBlocks a, b, c;
  ASSERT_TRUE(bm.allocate(a, 8));
  ASSERT_TRUE(bm.allocate(b, 8));
  ASSERT_TRUE(bm.allocate(c, 8));
  EXPECT_EQ(a.table, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(c.table, (std::vector<int32_t>{4, 5}));
  bm.release(b);  // free: 2, 3, 6-11
  for (int32_t n = 12; n <= 20; n += 4) {
    ASSERT_TRUE(bm.allocate(c, n));
    ASSERT_TRUE(bm.allocate(a, n));
  }
  EXPECT_EQ(a.table, (std::vector<int32_t>{0, 1, 2, 3, 9}));
  EXPECT_EQ(c.table, (std::vector<int32_t>{4, 5, 6, 7, 8}));
  SequenceBlocks d;
  ASSERT_TRUE(bm.allocate(d, 4));  // a new table starts at the lowest free id
  EXPECT_EQ(d.table, (std::vector<int32_t>{10}));
  ASSERT_TRUE(bm.allocate(c, 24));
  EXPECT_EQ(c.table.back(), 11);
  bm.release(a);
  ASSERT_TRUE(bm.allocate(c, 28));  // nothing above 11: from the lowest
  EXPECT_EQ(c.table.back(), 0);
  bm.check({&c, &d});
}

// Once the cached blocks fill the pool, an eviction takes the cold block (of the oldest
// quarter of a cache of 64 or more) above the table's last one: tables keep rising where
// strict LRU order would hand a chain's blocks out tail first, falling.
TEST(BlockManager, EvictionsTakeRisingBlocksFromTheColdEnd) {
  BlockManager bm(160, kBs);
  const std::vector<int32_t> t = iota_tokens(256);
  SequenceBlocks a = computed(bm, t);  // blocks 0-63, registered
  bm.release(a);                       // cached; the cold quarter: blocks 48-63, the chain's tail
  SequenceBlocks filler;
  ASSERT_TRUE(bm.allocate(filler, 96 * kBs));  // the 96 free blocks
  EXPECT_EQ(bm.stats().evictions, 0u);
  SequenceBlocks h;
  ASSERT_TRUE(bm.allocate(h, 4 * kBs));
  EXPECT_EQ(h.table, (std::vector<int32_t>{48, 49, 50, 51}));
  EXPECT_EQ(bm.stats().evictions, 4u);
  auto longer = t;
  longer.push_back(7);
  EXPECT_EQ(bm.cached_prefix_tokens(longer.data(), 257), 48 * kBs);  // the chain ends before 48
  bm.check({&filler, &h});
}

TEST(BlockManager, EvictsFreeCachedBlocksLeastRecentlyUsedFirst) {
  BlockManager bm(4, kBs);
  const std::vector<int32_t> x = iota_tokens(4, 0), y = iota_tokens(4, 10), z = iota_tokens(4, 20);
  SequenceBlocks sx = computed(bm, x), sy = computed(bm, y), sz = computed(bm, z);
  const int32_t bx = sx.table[0], by = sy.table[0], bz = sz.table[0];
  bm.release(sy);  // LRU order: y, x, z
  bm.release(sx);
  bm.release(sz);
  EXPECT_EQ(bm.num_cached(), 3);
  EXPECT_EQ(bm.num_free(), 4);
  // x is used again, then released: now y, z, x
  SequenceBlocks again;
  const std::vector<int32_t> x_longer = iota_tokens(5, 0);
  EXPECT_EQ(bm.take_cached_prefix(again, x_longer.data(), 5), 4);
  EXPECT_EQ(again.table[0], bx);
  bm.release(again);
  SequenceBlocks fresh;
  ASSERT_TRUE(bm.allocate(fresh, 4));  // the never-registered free block goes first
  EXPECT_EQ(bm.stats().evictions, 0u);
  ASSERT_TRUE(bm.allocate(fresh, 8));
  EXPECT_EQ(fresh.table[1], by);
  EXPECT_EQ(bm.stats().evictions, 1u);
  EXPECT_EQ(bm.cached_prefix_tokens(iota_tokens(5, 10).data(), 5), 0);
  EXPECT_EQ(bm.cached_prefix_tokens(iota_tokens(5, 20).data(), 5), 4);
  ASSERT_TRUE(bm.allocate(fresh, 12));
  EXPECT_EQ(fresh.table[2], bz);
  ASSERT_TRUE(bm.allocate(fresh, 16));
  EXPECT_EQ(fresh.table[3], bx);
  EXPECT_EQ(bm.stats().evictions, 3u);
  EXPECT_EQ(bm.num_cached(), 0);
  bm.check({&fresh});
}

TEST(BlockManager, ReleaseQueuesAChainTailFirst) {
  BlockManager bm(3, kBs);
  const std::vector<int32_t> t = iota_tokens(12);
  SequenceBlocks s = computed(bm, t);
  const std::vector<int32_t> table = s.table;
  bm.release(s);
  SequenceBlocks other;
  ASSERT_TRUE(bm.allocate(other, 4));
  EXPECT_EQ(other.table[0], table[2]);  // the last block is evicted first
  EXPECT_EQ(bm.cached_prefix_tokens(t.data(), 12), 8);
}

TEST(BlockManager, DuplicateBlockKeepsItsOwnAndStaysUnregistered) {
  BlockManager bm(8, kBs);
  const std::vector<int32_t> t = iota_tokens(9);
  SequenceBlocks a, b;
  ASSERT_TRUE(bm.allocate(a, 9));
  ASSERT_TRUE(bm.allocate(b, 9));  // both computed before either committed
  bm.commit(a, t.data(), 9);
  bm.commit(b, t.data(), 9);
  EXPECT_EQ(a.hashes, b.hashes);
  EXPECT_EQ(a.registrations, b.registrations);
  bm.check({&a, &b});
  bm.release(b);  // b's duplicates return to the free list, not the cache
  EXPECT_EQ(bm.num_cached(), 0);
  bm.release(a);
  EXPECT_EQ(bm.num_cached(), 2);
  bm.check({});
}

TEST(BlockManager, DuplicateWhoseOriginalWasEvictedStopsItsChain) {
  BlockManager bm(3, kBs);
  const std::vector<int32_t> t = iota_tokens(8);
  SequenceBlocks a, b;
  ASSERT_TRUE(bm.allocate(a, 4));
  ASSERT_TRUE(bm.allocate(b, 4));
  bm.commit(a, t.data(), 4);
  bm.commit(b, t.data(), 4);  // b's block 0 duplicates a's
  bm.release(a);
  SequenceBlocks evictor;
  ASSERT_TRUE(bm.allocate(evictor, 4));  // the free block
  bm.release(evictor);
  ASSERT_TRUE(bm.allocate(evictor, 8));  // ... and a's cached block
  EXPECT_EQ(bm.stats().evictions, 1u);
  bm.release(evictor);
  ASSERT_TRUE(bm.allocate(b, 8));
  bm.commit(b, t.data(), 8);
  EXPECT_EQ(b.registrations[1], BlockManager::kUnregistered);
  bm.check({&b});
  EXPECT_EQ(bm.cached_prefix_tokens(t.data(), 9), 0);
}

uint64_t constant_hash(uint64_t, const int32_t*, int32_t) { return 42; }

TEST(BlockManager, HashCollisionsNeverServeAWrongBlock) {
  BlockManager bm(8, kBs);
  bm.set_hash_function(&constant_hash);
  const std::vector<int32_t> x = iota_tokens(9, 0), y = iota_tokens(9, 50);
  SequenceBlocks sx = computed(bm, x);
  EXPECT_NE(sx.registrations[0], BlockManager::kUnregistered);
  // x's second block collides with its first: left unregistered
  EXPECT_EQ(sx.registrations[1], BlockManager::kUnregistered);
  EXPECT_EQ(bm.cached_prefix_tokens(y.data(), 9), 0);  // same hash, other tokens
  EXPECT_EQ(bm.cached_prefix_tokens(x.data(), 9), 4);
  SequenceBlocks sy = computed(bm, y);
  EXPECT_EQ(sy.registrations[0], BlockManager::kUnregistered);
  bm.check({&sx, &sy});
  EXPECT_THROW(bm.set_hash_function(&BlockManager::chain_hash), std::logic_error);
}

TEST(BlockManager, ChildOfACollidingParentIsNotServed) {
  // Every first block hashes alike; later blocks hash normally from their parent's hash.
  // r = (r0, c1) collides with a = (a0, a1) on its first block, so a cache that compared
  // only tokens and parent hashes would register c1 under r0's hash and later serve it
  // after a0, to b = (a0, c1), whose prefix it is not.
  BlockManager bm(8, kBs);
  bm.set_hash_function([](uint64_t parent, const int32_t* tokens, int32_t n) {
    return parent == 0 ? uint64_t{7} : BlockManager::chain_hash(parent, tokens, n);
  });
  const std::vector<int32_t> a = iota_tokens(8, 0), c1 = iota_tokens(4, 60);
  std::vector<int32_t> r = iota_tokens(4, 40);
  r.insert(r.end(), c1.begin(), c1.end());
  std::vector<int32_t> b(a.begin(), a.begin() + 4);
  b.insert(b.end(), c1.begin(), c1.end());
  b.push_back(0);
  SequenceBlocks sa = computed(bm, a), sr = computed(bm, r);
  EXPECT_EQ(sr.registrations, std::vector<uint64_t>(2, BlockManager::kUnregistered));
  bm.release(sa);
  bm.release(sr);
  EXPECT_EQ(bm.cached_prefix_tokens(b.data(), 9), 4);
  SequenceBlocks sb;
  EXPECT_EQ(bm.take_cached_prefix(sb, b.data(), 9), 4);
  bm.check({&sb});
}

TEST(BlockManager, ABlockIsServedOnlyAfterItsOwnParent) {
  // Hashing by first token only, b's first block collides with a's second block and has
  // the same tokens; a's block holds KV computed after a's first block, not from position 0.
  BlockManager bm(8, kBs);
  bm.set_hash_function([](uint64_t, const int32_t* tokens, int32_t) { return static_cast<uint64_t>(tokens[0]); });
  const std::vector<int32_t> a = iota_tokens(8, 0);
  const std::vector<int32_t> b = iota_tokens(5, 4);
  SequenceBlocks sa = computed(bm, a);
  EXPECT_NE(sa.registrations[1], BlockManager::kUnregistered);
  EXPECT_EQ(bm.cached_prefix_tokens(b.data(), 5), 0);
  bm.check({&sa});
}

TEST(BlockManager, PrefixCachingOff) {
  BlockManager bm(4, kBs, false);
  const std::vector<int32_t> t = iota_tokens(9);
  SequenceBlocks a = computed(bm, t);
  EXPECT_TRUE(a.hashes.empty());
  bm.release(a);
  EXPECT_EQ(bm.num_cached(), 0);
  EXPECT_EQ(bm.cached_prefix_tokens(t.data(), 9), 0);
  bm.check({});
}

TEST(BlockManager, CheckCatchesCorruption) {
  BlockManager bm(6, kBs);
  const std::vector<int32_t> t = iota_tokens(9);
  SequenceBlocks a = computed(bm, t);
  bm.check({&a});
  EXPECT_THROW(bm.check({}), std::logic_error);        // refcounts without holders
  EXPECT_THROW(bm.check({&a, &a}), std::logic_error);  // holders beyond refcounts
  SequenceBlocks forged = a;
  forged.table[2] = 5;  // a free block held by a table
  EXPECT_THROW(bm.check({&forged}), std::logic_error);
  forged.table[2] = 77;
  EXPECT_THROW(bm.check({&forged}), std::logic_error);
  forged = a;
  forged.hashes.push_back(1);
  EXPECT_THROW(bm.check({&forged}), std::logic_error);
  try {
    bm.check({});
    FAIL();
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("refcount"), std::string::npos) << e.what();
  }
}

// Each corruption alone must trip check(), with a message naming what broke.
TEST(BlockManager, CheckCatchesCorruptedInternals) {
  const std::vector<int32_t> t = iota_tokens(9);
  using Peer = BlockManagerTestPeer;
  auto expect_broken = [](const BlockManager& bm, const std::vector<const SequenceBlocks*>& live, const char* words) {
    try {
      bm.check(live);
      ADD_FAILURE() << "check() passed, expected: " << words;
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  auto fresh = [&](BlockManager& bm) {
    SequenceBlocks released = computed(bm, t);  // two registered blocks, then cached
    bm.release(released);
    SequenceBlocks held;
    EXPECT_TRUE(bm.allocate(held, 4));
    return held;
  };
  {
    BlockManager bm(6, kBs);
    SequenceBlocks held = fresh(bm);
    bm.check({&held});
    Peer::free_set(bm).insert(Peer::index(bm).begin()->second);  // a cached block
    expect_broken(bm, {&held}, "in the free set but not marked free");
  }
  {
    BlockManager bm(6, kBs);
    SequenceBlocks held = fresh(bm);
    Peer::free_set(bm).insert(held.table[0]);  // a used one
    expect_broken(bm, {&held}, "in the free set but not marked free");
  }
  {
    BlockManager bm(6, kBs);
    SequenceBlocks held = fresh(bm);
    Peer::free_set(bm).insert(Peer::free_set(bm).lowest_from(0));  // counted twice
    expect_broken(bm, {&held}, "the free count is 4, the free set holds 3");
  }
  {
    BlockManager bm(6, kBs);
    SequenceBlocks held = fresh(bm);  // nothing evicted: nothing cold
    Peer::cold_set(bm).insert(Peer::index(bm).begin()->second);
    expect_broken(bm, {&held}, "is cold past the cold end");
  }
  {
    BlockManager bm(6, kBs);
    SequenceBlocks held = fresh(bm);
    auto& index = Peer::index(bm);
    const int32_t id = index.begin()->second;
    index.begin()->second = held.table[0];
    expect_broken(bm, {&held}, "index does not point at it");
    index.begin()->second = id;
    index.emplace(12345, held.table[0]);
    expect_broken(bm, {&held}, "stored hash differs");
  }
  {
    BlockManager bm(6, kBs);
    SequenceBlocks held = fresh(bm);
    const int32_t cached = Peer::index(bm).begin()->second;
    Peer::lru_prev(bm, cached) = 5;
    expect_broken(bm, {&held}, "LRU list is broken");
  }
  {
    BlockManager bm(6, kBs);
    SequenceBlocks held = fresh(bm);
    Peer::refcount(bm, held.table[0]) = 2;
    expect_broken(bm, {&held}, "has refcount 2 but 1 tables hold it");
  }
}

// Computes tokens one step per position, as decode does: each step allocates from the row
// it computes, then commits.
void decode_all(BlockManager& bm, SequenceBlocks& seq, const std::vector<int32_t>& tokens, int32_t from = 0) {
  for (auto p = from; p < static_cast<int32_t>(tokens.size()); ++p) {
    ASSERT_TRUE(bm.allocate(seq, p + 1, p));
    bm.commit(seq, tokens.data(), p + 1);
    bm.check({&seq});
  }
}

TEST(BlockManagerWindows, SlidingTablesGiveBackWhatNoLaterRowReads) {
  BlockManager bm(64, kBs, true, {0, 8});
  const auto tokens = iota_tokens(40);
  SequenceBlocks seq;
  bm.take_cached_prefix(seq, tokens.data(), 40);
  decode_all(bm, seq, tokens);
  ASSERT_EQ(seq.table.size(), 10u);
  ASSERT_EQ(seq.windowed.size(), 1u);
  // The row at 39 saw 32-39: blocks 8 and 9. The next row, at 40, sees 33-40.
  const auto& window = seq.windowed[0];
  for (size_t j = 0; j < 8; ++j) EXPECT_EQ(window[j], kNoBlock) << j;
  EXPECT_NE(window[8], kNoBlock);
  EXPECT_NE(window[9], kNoBlock);
  // The given-back blocks were full and registered: they wait in the prefix cache.
  EXPECT_EQ(bm.num_used(), 12);
  EXPECT_EQ(bm.num_cached(), 8);
  const std::vector<int32_t> kept = window;
  bm.release(seq);
  EXPECT_EQ(bm.num_used(), 0);
  bm.check({});

  // The same 40 tokens and one more: the row at 40 sees 33-40, so blocks 8 and 9 of the
  // sliding group come from the cache, and nothing before them.
  auto longer = tokens;
  longer.push_back(7);
  SequenceBlocks again;
  EXPECT_EQ(bm.take_cached_prefix(again, longer.data(), 41), 40);
  EXPECT_EQ(again.windowed[0], kept);
  bm.check({&again});
}

TEST(BlockManagerWindows, APrefixHitShrinksUntilItsWindowIsCached) {
  BlockManager bm(64, kBs, true, {0, 8});
  const auto tokens = iota_tokens(40);
  SequenceBlocks a = computed(bm, tokens);  // one chunk: every block of both groups registered
  const std::vector<int32_t> a_window = a.windowed[0];
  bm.release(a);
  auto longer = tokens;
  longer.push_back(7);
  EXPECT_EQ(bm.cached_prefix_tokens(longer.data(), 41), 40);

  // a's release queued its last position first, sliding block before global one: the first
  // eviction takes the sliding block of positions 36-39, which the row at 40 reads. The hit
  // falls back to 36 tokens, whose next row reads blocks 7 and 8.
  ASSERT_EQ(bm.num_free() - bm.num_cached(), 44);
  SequenceBlocks other;  // 43 blocks of group 0 and the 2 its row at 171 reads in the sliding group
  ASSERT_TRUE(bm.allocate(other, 172, 171));
  EXPECT_EQ(bm.stats().evictions, 1u);
  EXPECT_EQ(bm.cached_prefix_tokens(longer.data(), 41), 36);
  SequenceBlocks c;
  EXPECT_EQ(bm.take_cached_prefix(c, longer.data(), 41), 36);
  ASSERT_EQ(c.windowed[0].size(), 9u);
  EXPECT_EQ(c.windowed[0][7], a_window[7]);
  EXPECT_EQ(c.windowed[0][8], a_window[8]);
  EXPECT_EQ(c.windowed[0][6], kNoBlock);
  bm.check({&c, &other});
}

TEST(BlockManagerWindows, AllocationCountsEveryGroupAllOrNothing) {
  // Two sliding groups: a fresh sequence of 8 positions takes 2 blocks in each of 3 groups.
  BlockManager bm(7, kBs, true, {0, 4, 4});
  SequenceBlocks seq;
  ASSERT_TRUE(bm.allocate(seq, 8, 0));
  EXPECT_EQ(bm.num_used(), 6);
  // Computing 8-11 next: the sliding groups give block 0 back (the row at 8 sees 5-8) and
  // take block 2; group 0 takes block 2 too: 3 wanted, 1 free and 2 given back.
  ASSERT_TRUE(bm.allocate(seq, 12, 8));
  EXPECT_EQ(bm.num_used(), 7);
  bm.check({&seq});
  // Then 12-15 wants 3 more and only 2 come back: refused, and no block taken.
  EXPECT_FALSE(bm.allocate(seq, 16, 12));
  EXPECT_EQ(seq.table.size(), 3u);
  bm.check({&seq});
}

TEST(BlockManagerWindows, CapacityLeavesRoomForTheWindows) {
  EXPECT_EQ(BlockManager(100, kBs).capacity_tokens(64), 400);
  // One sliding group of 8: a chunk of 16 rows reaches over (16 + 7) / 4 + 1 = 6 blocks of it.
  const BlockManager bm(100, kBs, true, {0, 8});
  EXPECT_EQ(bm.capacity_tokens(16), (100 - 7) * kBs);
  EXPECT_LE(blocks_for_tokens(bm.windows(), bm.capacity_tokens(16), kBs, 16), 100);
  EXPECT_GT(blocks_for_tokens(bm.windows(), bm.capacity_tokens(16) + 1, kBs, 16), 100);
  EXPECT_THROW(BlockManager(10, kBs, true, {8}), std::invalid_argument);
  EXPECT_THROW(BlockManager(10, kBs, true, {0, 0}), std::invalid_argument);
}

}  // namespace
}  // namespace orzo
