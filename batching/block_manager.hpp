#pragma once
// Which KV blocks each sequence owns, and which full blocks are kept for reuse as a prefix
// cache. A pool of num_blocks ids, each with a refcount (the number of sequence tables that
// hold it). A block reaching refcount 0 returns to the free set, unless it holds a full
// block registered in the prefix cache: then it stays cached, at the tail of an LRU list, and
// is evicted (its registration dropped) only when an allocation finds the free set empty.
//
// A table grows with the lowest free id above its last block (else the lowest free id), so
// that a sequence's blocks lie at rising addresses, the direction the CPU's prefetchers
// follow best; sequences growing side by side then interleave in rising order. Handed out
// from a stack, the blocks that finished sequences gave back came in any order, and 64
// stories260K sequences decoded 15-25 % slower on such tables than on rising ones
// (docs/BENCHMARKS.md, "Rising block tables"). Once the cached blocks fill the pool, every
// new block is an eviction, and strict LRU order would scatter tables again; so an eviction
// takes, among the oldest quarter of the cached blocks (the LRU list's cold end), the one
// above the table's last block. Within that quarter the order of use is given up, and with it
// the rule that a chain goes tail first; a cache of fewer than 64 blocks, where each one
// counts and a quarter offers little choice, stays exactly LRU.
//
// A registered block is found by its chain hash (a hash of the previous block's chain hash
// and the block's token ids), but a hash match alone never serves a block: a hit also needs
// the block's stored tokens to equal the query's and its stored parent to be the very block
// matched just before (compared by a registration number that is never reused). A served
// prefix is therefore exact whatever the hash does; a collision only costs a cache hit.
//
// Where the layers' KV lives in groups (core/kv_layout.hpp), a sequence holds a table per
// group. Group 0's (global layers) is the one described above. A sliding group's table gives
// back each block no future row of the sequence reads (kNoBlock in its place), and its full
// blocks are registered under the registration of group 0's block for the same prefix: that
// number names the exact prefix, so a sliding block needs no hash or tokens of its own. A
// prefix hit then also needs, in every sliding group, the blocks its first computed row's
// window reaches; the hit shrinks until they are cached.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "batching/block_set.hpp"
#include "core/kv_layout.hpp"

namespace orzo {

struct SequenceBlocks {
  std::vector<int32_t> table;    // group 0's block ids; position p lives in table[p / block_size]
  // Per sliding group (group g at g - 1): its table, as long as `table`, kNoBlock where given back.
  std::vector<std::vector<int32_t>> windowed;
  std::vector<uint64_t> hashes;  // chain hash of each full block committed so far
  // Per entry of `hashes`: the registration number of the cached block holding exactly this
  // prefix (the sequence's own block, or the one registered first when it was a duplicate),
  // or BlockManager::kUnregistered when no block was registered for it: its hash was taken
  // by another block, or its parent had no live registration.
  std::vector<uint64_t> registrations;
};

class BlockManager {
 public:
  static constexpr uint64_t kUnregistered = ~uint64_t{0};
  using HashFunction = uint64_t (*)(uint64_t parent, const int32_t* tokens, int32_t n);

  struct Stats {
    uint64_t prefix_queries = 0, prefix_query_tokens = 0, prefix_hit_tokens = 0, evictions = 0;
  };

  // windows: per group of the KV layout, 0 for global layers, else the window; group 0 global.
  // Throws std::invalid_argument unless num_blocks >= 1, block_size >= 1 and windows are so.
  BlockManager(int32_t num_blocks, int32_t block_size, bool prefix_caching = true, std::vector<int32_t> windows = {0});

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  const std::vector<int32_t>& windows() const { return windows_; }
  bool prefix_caching() const { return prefix_caching_; }
  int32_t num_free() const { return free_.size() + num_cached_; }  // refcount 0
  int32_t num_used() const { return num_blocks() - num_free(); }
  int32_t num_cached() const { return num_cached_; }  // refcount 0 but still registered
  const Stats& stats() const { return stats_; }

  // The chain hash used unless a test replaces it.
  static uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int32_t n);
  // For tests that force collisions; only while nothing is registered (std::logic_error otherwise).
  void set_hash_function(HashFunction hash);

  // Tokens covered by the longest cached prefix of `tokens`, in whole blocks, counting only
  // blocks that lie entirely within [0, n - 1): the last token is always left to compute, and
  // with it the block it lands in, which a step will write and so must not be shared. With
  // sliding groups, only a prefix whose following row finds its window cached in each.
  int32_t cached_prefix_tokens(const int32_t* tokens, int32_t n) const;

  // Gives a sequence with an empty table the cached blocks of that prefix (refcount++, out of
  // the LRU list) and returns the tokens they cover. Counts one prefix query (when prefix
  // caching is on).
  int32_t take_cached_prefix(SequenceBlocks& seq, const int32_t* tokens, int32_t n);

  // Grows seq's tables to cover `num_tokens` positions, for a step that computes those from
  // `from` on. Sliding groups first give back the blocks before the window of the row at
  // `from` (no later row reads them) and take none there. All or nothing beyond that: false,
  // and nothing taken, when the free blocks (cached ones included, evicted least recently used
  // first) are too few.
  bool allocate(SequenceBlocks& seq, int32_t num_tokens, int32_t from = 0);

  // The longest sequence the whole pool holds while its steps compute chunks of up to `chunk`
  // rows (core/kv_layout.hpp's blocks_for_tokens).
  int64_t capacity_tokens(int32_t chunk) const;

  // After a step computed the KV of positions [0, num_computed) of `tokens`: registers each
  // newly full block of seq. When an identical block is already registered the sequence
  // keeps its own block, unregistered (a duplicate for as long as the sequence lives; the
  // table the backend already addresses never changes under it).
  void commit(SequenceBlocks& seq, const int32_t* tokens, int32_t num_computed);

  // Drops all of seq's blocks (refcount--) and clears it. Blocks reaching 0 that are
  // registered join the LRU tail, the sequence's last position first (its sliding groups'
  // blocks before group 0's), so that a chain is evicted from its end and its head stays
  // useful longest.
  void release(SequenceBlocks& seq);

  // Empties the prefix cache: every cached block returns to the free set, unregistered. For
  // when the KV those blocks point at is gone (a worker that holds a stage was replaced).
  // Only while no sequence holds blocks (std::logic_error otherwise), so that no table
  // refers to a registration that disappears.
  void forget_cached();

  // Throws std::logic_error naming the first broken invariant: each refcount equals the
  // number of `live` table entries holding the block; free, cached and used blocks partition
  // the pool, no block in two lists; the indexes hold exactly the registered blocks, each
  // under its own key; each sequence's hashes fit its table, and it has a table per group.
  void check(const std::vector<const SequenceBlocks*>& live) const;

 private:
  friend struct BlockManagerTestPeer;  // corrupts the private state to test check()

  enum class Where : uint8_t { free, cached, used };
  struct Block {
    int32_t refcount = 0;
    Where where = Where::free;
    int32_t lru_prev = -1, lru_next = -1;
    uint64_t hash = 0;                             // group 0: chain hash; sliding group: its anchor
    uint64_t registration = kUnregistered;         // kUnregistered: not in the prefix cache
    uint64_t parent_registration = kUnregistered;  // kRoot for a sequence's first block
    int32_t group = 0;                             // the group it is registered in
  };
  static constexpr uint64_t kRoot = 0;

  // Whether registered block id holds `tokens` right after the block registered as `parent`.
  bool holds(int32_t id, uint64_t parent, const int32_t* tokens) const;
  // The registered block holding `tokens` after the block registered as `parent`, or -1.
  int32_t find(uint64_t hash, uint64_t parent, const int32_t* tokens) const;
  // Whether the block registered as `registration` under `hash` is still registered.
  bool alive(uint64_t hash, uint64_t registration) const;
  // Walks the chain of `tokens` over at most max_blocks blocks, calling on_hit(block, hash)
  // for each hit; returns the number of hits.
  template <typename OnHit>
  int32_t walk(const int32_t* tokens, int32_t max_blocks, OnHit on_hit) const;
  // Of `hits` leading blocks cached in group 0 with these registrations, how many a prefix
  // hit may take: the most whose following row finds its window cached in every sliding group.
  int32_t usable_hits(const std::vector<uint64_t>& registrations) const;
  // The registered block of sliding group g (>= 1) for the prefix group 0 registered as `anchor`, or -1.
  int32_t find_windowed(int32_t g, uint64_t anchor) const;
  void drop(int32_t id);  // one table entry fewer: refcount--, at 0 to the LRU tail or the free set
  // For a table whose last block is `after` (-1: none): the lowest free id above it, else the
  // lowest free id, else evict(after).
  int32_t take_block(int32_t after);
  // Drops a cold block from the prefix cache for a table whose last block is `after`: the
  // lowest cold id above it, else the lowest cold id. Only while blocks are cached.
  int32_t evict(int32_t after);
  void lru_push_back(int32_t id);
  void lru_unlink(int32_t id);
  void unregister(Block& b);
  std::size_t tokens_at(int32_t id) const;  // where block id's tokens start in block_tokens_

  int32_t block_size_;
  bool prefix_caching_;
  HashFunction hash_ = &chain_hash;
  std::vector<Block> blocks_;
  // block_size token ids per block, meaningful while it is registered; one flat array, so
  // that registering a block allocates nothing.
  std::vector<int32_t> block_tokens_;
  BlockSet free_;
  // The cold end of the LRU list: the blocks before cold_end_ (-1: all of them), topped up
  // before each eviction, which takes the cold block above the table's last one, to
  // 1/kColdShare of the cached blocks, or to one while fewer than kColdFrom are cached.
  static constexpr int32_t kColdShare = 4, kColdFrom = 64;
  BlockSet cold_;
  int32_t cold_end_ = -1;
  int32_t lru_head_ = -1, lru_tail_ = -1, num_cached_ = 0;
  std::unordered_map<uint64_t, int32_t> index_;  // chain hash -> registered block
  std::vector<int32_t> windows_;
  // Per sliding group (g at g - 1): group 0's registration of a prefix -> its block there.
  std::vector<std::unordered_map<uint64_t, int32_t>> windowed_index_;
  mutable std::vector<uint64_t> hit_registrations_;  // scratch of prefix queries
  uint64_t next_registration_ = kRoot + 1;
  Stats stats_;
};

}  // namespace orzo
