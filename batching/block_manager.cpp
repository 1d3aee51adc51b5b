#include "batching/block_manager.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace orzo {
namespace {

// The splitmix64 finalizer: every input bit reaches every output bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

size_t to_size(int32_t n) { return static_cast<size_t>(n); }

[[noreturn]] void broken(const std::string& what) { throw std::logic_error("BlockManager: " + what); }

// A table's last block id, or -1 when it holds none (a sliding table's given-back entries
// are kNoBlock, which is -1 too, and only ever lead).
int32_t last_block(const std::vector<int32_t>& table) { return table.empty() ? -1 : table.back(); }

}  // namespace

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool prefix_caching, std::vector<int32_t> windows)
    : block_size_(block_size),
      prefix_caching_(prefix_caching),
      free_(std::max(num_blocks, 0), true),
      cold_(std::max(num_blocks, 0), false),
      windows_(std::move(windows)) {
  if (num_blocks < 1) throw std::invalid_argument("BlockManager: num_blocks must be >= 1, got " + std::to_string(num_blocks));
  if (block_size < 1) throw std::invalid_argument("BlockManager: block_size must be >= 1, got " + std::to_string(block_size));
  if (windows_.empty() || windows_[0] != 0 ||
      std::any_of(windows_.begin() + 1, windows_.end(), [](int32_t w) { return w <= 0; }))
    throw std::invalid_argument("BlockManager: group 0 must be global and every other group sliding");
  windowed_index_.resize(windows_.size() - 1);
  blocks_.resize(to_size(num_blocks));
  if (prefix_caching) {
    block_tokens_.resize(to_size(num_blocks) * to_size(block_size));
    index_.reserve(to_size(num_blocks));
  }
}

uint64_t BlockManager::chain_hash(uint64_t parent, const int32_t* tokens, int32_t n) {
  uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ULL);
  for (int32_t i = 0; i < n; ++i) h = mix(h + static_cast<uint32_t>(tokens[i]));
  return mix(h ^ static_cast<uint64_t>(n));
}

void BlockManager::set_hash_function(HashFunction hash) {
  if (!index_.empty()) throw std::logic_error("BlockManager: the hash function can only change while nothing is registered");
  hash_ = hash;
}

bool BlockManager::holds(int32_t id, uint64_t parent, const int32_t* tokens) const {
  return blocks_[to_size(id)].parent_registration == parent &&
         std::equal(tokens, tokens + block_size_, block_tokens_.data() + tokens_at(id));
}

int32_t BlockManager::find(uint64_t hash, uint64_t parent, const int32_t* tokens) const {
  auto it = index_.find(hash);
  return it != index_.end() && holds(it->second, parent, tokens) ? it->second : -1;
}

size_t BlockManager::tokens_at(int32_t id) const { return to_size(id) * to_size(block_size_); }

bool BlockManager::alive(uint64_t hash, uint64_t registration) const {
  auto it = index_.find(hash);
  return it != index_.end() && blocks_[to_size(it->second)].registration == registration;
}

template <typename OnHit>
int32_t BlockManager::walk(const int32_t* tokens, int32_t max_blocks, OnHit on_hit) const {
  if (!prefix_caching_) return 0;
  uint64_t hash = 0, parent = kRoot;
  int32_t hits = 0;
  for (; hits < max_blocks; ++hits) {
    const int32_t* block_tokens = tokens + static_cast<ptrdiff_t>(hits) * block_size_;
    hash = hash_(hash, block_tokens, block_size_);
    const int32_t id = find(hash, parent, block_tokens);
    if (id < 0) break;
    on_hit(id, hash);
    parent = blocks_[to_size(id)].registration;
  }
  return hits;
}

int32_t BlockManager::find_windowed(int32_t g, uint64_t anchor) const {
  const auto& index = windowed_index_[to_size(g - 1)];
  auto it = index.find(anchor);
  return it != index.end() ? it->second : -1;
}

int32_t BlockManager::usable_hits(const std::vector<uint64_t>& registrations) const {
  auto hits = static_cast<int32_t>(registrations.size());
  for (; hits > 0; --hits) {
    bool cached = true;
    for (int32_t g = 1; cached && g < static_cast<int32_t>(windows_.size()); ++g)
      for (int32_t j = first_block_read(windows_[to_size(g)], hits * block_size_, block_size_); cached && j < hits; ++j)
        cached = find_windowed(g, registrations[to_size(j)]) >= 0;
    if (cached) break;
  }
  return hits;
}

int32_t BlockManager::cached_prefix_tokens(const int32_t* tokens, int32_t n) const {
  if (n < 1) return 0;
  hit_registrations_.clear();
  walk(tokens, (n - 1) / block_size_, [&](int32_t id, uint64_t) { hit_registrations_.push_back(blocks_[to_size(id)].registration); });
  return usable_hits(hit_registrations_) * block_size_;
}

int32_t BlockManager::take_cached_prefix(SequenceBlocks& seq, const int32_t* tokens, int32_t n) {
  if (!seq.table.empty()) throw std::logic_error("BlockManager::take_cached_prefix: the sequence already holds blocks");
  seq.windowed.assign(windows_.size() - 1, {});
  if (n < 1 || !prefix_caching_) return 0;
  hit_registrations_.clear();
  walk(tokens, (n - 1) / block_size_, [&](int32_t id, uint64_t hash) {
    seq.table.push_back(id);
    seq.hashes.push_back(hash);
    hit_registrations_.push_back(blocks_[to_size(id)].registration);
  });
  const int32_t hits = usable_hits(hit_registrations_);
  seq.table.resize(to_size(hits));
  seq.hashes.resize(to_size(hits));
  seq.registrations.assign(hit_registrations_.begin(), hit_registrations_.begin() + hits);
  const auto take = [&](int32_t id) {
    Block& b = blocks_[to_size(id)];
    if (b.refcount++ == 0) {
      lru_unlink(id);
      b.where = Where::used;
    }
  };
  for (int32_t id : seq.table) take(id);
  for (int32_t g = 1; g < static_cast<int32_t>(windows_.size()); ++g) {
    auto& table = seq.windowed[to_size(g - 1)];
    const int32_t first = first_block_read(windows_[to_size(g)], hits * block_size_, block_size_);
    table.assign(to_size(first), kNoBlock);
    for (int32_t j = first; j < hits; ++j) {
      table.push_back(find_windowed(g, seq.registrations[to_size(j)]));
      take(table.back());
    }
  }
  const int32_t covered = hits * block_size_;
  ++stats_.prefix_queries;
  stats_.prefix_query_tokens += static_cast<uint64_t>(n);
  stats_.prefix_hit_tokens += static_cast<uint64_t>(covered);
  return covered;
}

bool BlockManager::allocate(SequenceBlocks& seq, int32_t num_tokens, int32_t from) {
  const auto groups = static_cast<int32_t>(windows_.size());
  seq.windowed.resize(to_size(groups - 1));
  const int64_t wanted = (static_cast<int64_t>(num_tokens) + block_size_ - 1) / block_size_;
  int64_t missing = std::max<int64_t>(0, wanted - static_cast<int64_t>(seq.table.size()));
  for (int32_t g = 1; g < groups; ++g) {
    auto& table = seq.windowed[to_size(g - 1)];
    const int32_t first = first_block_read(windows_[to_size(g)], from, block_size_);
    for (int32_t j = 0; j < std::min<int32_t>(first, static_cast<int32_t>(table.size())); ++j)
      if (table[to_size(j)] != kNoBlock) {
        drop(table[to_size(j)]);
        table[to_size(j)] = kNoBlock;
      }
    for (int64_t j = static_cast<int64_t>(table.size()); j < wanted; ++j) missing += j >= first ? 1 : 0;
  }
  if (missing > num_free()) return false;
  while (static_cast<int64_t>(seq.table.size()) < wanted) seq.table.push_back(take_block(last_block(seq.table)));
  for (int32_t g = 1; g < groups; ++g) {
    auto& table = seq.windowed[to_size(g - 1)];
    const int32_t first = first_block_read(windows_[to_size(g)], from, block_size_);
    while (static_cast<int64_t>(table.size()) < wanted)
      table.push_back(static_cast<int32_t>(table.size()) < first ? kNoBlock : take_block(last_block(table)));
  }
  return true;
}

int64_t BlockManager::capacity_tokens(int32_t chunk) const {
  // The largest n with blocks_for_tokens(n) <= num_blocks: that count grows with n.
  int64_t lo = 0, hi = int64_t{num_blocks()} * block_size_;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (blocks_for_tokens(windows_, mid, block_size_, chunk) <= num_blocks())
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

int32_t BlockManager::take_block(int32_t after) {
  int32_t id = free_.lowest_above(after);
  if (id >= 0)
    free_.erase(id);
  else
    id = evict(after);
  Block& b = blocks_[to_size(id)];
  b.refcount = 1;
  b.where = Where::used;
  return id;
}

int32_t BlockManager::evict(int32_t after) {
  const int32_t target = num_cached_ >= kColdFrom ? num_cached_ / kColdShare : 1;
  while (cold_.size() < target && cold_end_ >= 0) {
    cold_.insert(cold_end_);
    cold_end_ = blocks_[to_size(cold_end_)].lru_next;
  }
  const int32_t id = cold_.lowest_above(after);
  lru_unlink(id);
  unregister(blocks_[to_size(id)]);
  ++stats_.evictions;
  return id;
}

void BlockManager::commit(SequenceBlocks& seq, const int32_t* tokens, int32_t num_computed) {
  if (!prefix_caching_) return;
  const size_t full = std::min(to_size(std::max(num_computed, 0) / block_size_), seq.table.size());
  for (size_t j = seq.hashes.size(); j < full; ++j) {
    const int32_t* block_tokens = tokens + j * to_size(block_size_);
    const uint64_t parent_hash = j == 0 ? 0 : seq.hashes[j - 1];
    const uint64_t parent = j == 0 ? kRoot : seq.registrations[j - 1];
    const uint64_t hash = hash_(parent_hash, block_tokens, block_size_);
    uint64_t registration = kUnregistered;
    // The parent is the sequence's own block, alive, or a duplicate's original, which may
    // have been evicted since; a child registered under it could never be reached, so the
    // chain stops there.
    const bool own_parent = j > 0 && parent != kUnregistered && blocks_[to_size(seq.table[j - 1])].registration == parent;
    if (parent == kRoot || own_parent || alive(parent_hash, parent)) {
      if (auto it = index_.find(hash); it == index_.end()) {
        const int32_t id = seq.table[j];
        Block& b = blocks_[to_size(id)];
        b.hash = hash;
        b.registration = registration = next_registration_++;
        b.parent_registration = parent;
        std::copy(block_tokens, block_tokens + block_size_, block_tokens_.data() + tokens_at(id));
        index_.emplace(hash, id);
      } else if (holds(it->second, parent, block_tokens)) {
        registration = blocks_[to_size(it->second)].registration;
      }
    }
    seq.hashes.push_back(hash);
    seq.registrations.push_back(registration);
    // The sliding groups' blocks of this prefix, anchored to its registration, unless given
    // back already (a later plan moved past them while this step computed) or cached before.
    if (registration == kUnregistered) continue;
    for (int32_t g = 1; g < static_cast<int32_t>(windows_.size()); ++g) {
      const auto& table = seq.windowed[to_size(g - 1)];
      if (j >= table.size() || table[j] == kNoBlock || find_windowed(g, registration) >= 0) continue;
      Block& b = blocks_[to_size(table[j])];
      b.hash = registration;
      b.group = g;
      b.registration = next_registration_++;
      windowed_index_[to_size(g - 1)].emplace(registration, table[j]);
    }
  }
}

void BlockManager::drop(int32_t id) {
  Block& b = blocks_[to_size(id)];
  if (--b.refcount > 0) return;
  if (b.registration != kUnregistered) {
    b.where = Where::cached;
    lru_push_back(id);
  } else {
    b.where = Where::free;
    free_.insert(id);
  }
}

void BlockManager::release(SequenceBlocks& seq) {
  for (size_t j = seq.table.size(); j-- > 0;) {
    for (const auto& table : seq.windowed)
      if (j < table.size() && table[j] != kNoBlock) drop(table[j]);
    drop(seq.table[j]);
  }
  seq.table.clear();
  seq.windowed.clear();
  seq.hashes.clear();
  seq.registrations.clear();
}

void BlockManager::forget_cached() {
  if (num_used() != 0)
    throw std::logic_error("BlockManager: cannot forget the prefix cache while " + std::to_string(num_used()) +
                           " blocks are in use");
  while (lru_head_ >= 0) {
    const int32_t id = lru_head_;
    lru_unlink(id);
    Block& b = blocks_[to_size(id)];
    unregister(b);
    b.where = Where::free;
    free_.insert(id);
  }
}

void BlockManager::lru_push_back(int32_t id) {
  Block& b = blocks_[to_size(id)];
  b.lru_prev = lru_tail_;
  b.lru_next = -1;
  (lru_tail_ >= 0 ? blocks_[to_size(lru_tail_)].lru_next : lru_head_) = id;
  lru_tail_ = id;
  if (cold_end_ < 0) cold_end_ = id;
  ++num_cached_;
}

void BlockManager::lru_unlink(int32_t id) {
  Block& b = blocks_[to_size(id)];
  if (cold_.contains(id))
    cold_.erase(id);
  else if (id == cold_end_)
    cold_end_ = b.lru_next;
  (b.lru_prev >= 0 ? blocks_[to_size(b.lru_prev)].lru_next : lru_head_) = b.lru_next;
  (b.lru_next >= 0 ? blocks_[to_size(b.lru_next)].lru_prev : lru_tail_) = b.lru_prev;
  b.lru_prev = b.lru_next = -1;
  --num_cached_;
}

void BlockManager::unregister(Block& b) {
  if (b.group == 0)
    index_.erase(b.hash);
  else
    windowed_index_[to_size(b.group - 1)].erase(b.hash);
  b.registration = b.parent_registration = kUnregistered;
  b.hash = 0;
  b.group = 0;
}

void BlockManager::check(const std::vector<const SequenceBlocks*>& live) const {
  const size_t n = blocks_.size();
  std::vector<int32_t> holders(n, 0);
  for (const SequenceBlocks* seq : live) {
    if (!seq->table.empty() && seq->windowed.size() + 1 != windows_.size())
      broken("a sequence has " + std::to_string(seq->windowed.size()) + " sliding tables, the layout " +
             std::to_string(windows_.size() - 1));
    const auto hold = [&](int32_t id) {
      if (id < 0 || to_size(id) >= n) broken("a sequence table holds block id " + std::to_string(id) + ", outside the pool");
      ++holders[to_size(id)];
    };
    for (int32_t id : seq->table) hold(id);
    for (const auto& table : seq->windowed) {
      if (table.size() != seq->table.size()) broken("a sequence's sliding table and its global one differ in length");
      for (int32_t id : table)
        if (id != kNoBlock) hold(id);
    }
    if (seq->hashes.size() != seq->registrations.size() || seq->hashes.size() > seq->table.size())
      broken("a sequence has " + std::to_string(seq->hashes.size()) + " hashes and " +
             std::to_string(seq->registrations.size()) + " registrations for " + std::to_string(seq->table.size()) +
             " blocks");
  }
  std::vector<uint8_t> listed(n, 0);
  auto visit = [&](int32_t id, const char* list) {
    if (id < 0 || to_size(id) >= n) broken(std::string("the ") + list + " list holds block id " + std::to_string(id));
    if (listed[to_size(id)]++) broken("block " + std::to_string(id) + " is listed twice (seen again in the " + list + " list)");
  };
  int32_t free = 0;
  free_.for_each([&](int32_t id) {
    visit(id, "free");
    const Block& b = blocks_[to_size(id)];
    if (b.where != Where::free || b.registration != kUnregistered)
      broken("block " + std::to_string(id) + " is in the free set but not marked free and unregistered");
    ++free;
  });
  if (free != free_.size()) broken("the free count is " + std::to_string(free_.size()) + ", the free set holds " + std::to_string(free));
  int32_t cached = 0, cold = 0, prev = -1;
  bool warm = false;  // past cold_end_
  for (int32_t id = lru_head_; id >= 0; prev = id, id = blocks_[to_size(id)].lru_next) {
    visit(id, "cached");
    const Block& b = blocks_[to_size(id)];
    if (b.lru_prev != prev) broken("the LRU list is broken at block " + std::to_string(id));
    warm = warm || id == cold_end_;
    if (cold_.contains(id) == warm)
      broken("block " + std::to_string(id) + (warm ? " is cold past" : " is not cold before") + " the cold end of the LRU list");
    cold += warm ? 0 : 1;
    if (b.where != Where::cached || b.registration == kUnregistered)
      broken("block " + std::to_string(id) + " is on the LRU list but not marked cached and registered");
    ++cached;
  }
  if (prev != lru_tail_) broken("the LRU tail is not the last block of the list");
  if (cached != num_cached_) broken("the cached count is " + std::to_string(num_cached_) + ", the LRU list holds " + std::to_string(cached));
  if (cold_end_ >= 0 && !warm) broken("the cold end of the LRU list, block " + std::to_string(cold_end_) + ", is not on it");
  if (cold != cold_.size()) broken(std::to_string(cold_.size()) + " blocks are cold, " + std::to_string(cold) + " of them on the LRU list");
  for (size_t i = 0; i < n; ++i) {
    const Block& b = blocks_[i];
    const std::string name = "block " + std::to_string(i);
    if (b.refcount != holders[i])
      broken(name + " has refcount " + std::to_string(b.refcount) + " but " + std::to_string(holders[i]) + " tables hold it");
    if ((b.refcount > 0) != (b.where == Where::used)) broken(name + " is marked used iff its refcount is > 0, which fails");
    if (b.where == Where::used && listed[i]) broken(name + " is used yet on a free or cached list");
    if (b.where != Where::used && !listed[i]) broken(name + " has refcount 0 yet is on neither the free nor the LRU list");
    if (b.registration != kUnregistered) {
      if (b.group < 0 || to_size(b.group) >= windows_.size()) broken(name + " is registered in group " + std::to_string(b.group));
      const auto& index = b.group == 0 ? index_ : windowed_index_[to_size(b.group - 1)];
      auto it = index.find(b.hash);
      if (it == index.end() || to_size(it->second) != i) broken(name + " is registered but the index does not point at it");
    }
  }
  for (size_t g = 1; g < windows_.size(); ++g)
    for (const auto& [anchor, id] : windowed_index_[g - 1]) {
      if (id < 0 || to_size(id) >= n) broken("a sliding group's index points at block id " + std::to_string(id));
      const Block& b = blocks_[to_size(id)];
      if (b.registration == kUnregistered || to_size(b.group) != g || b.hash != anchor)
        broken("a sliding group's index points at block " + std::to_string(id) + ", registered otherwise");
    }
  for (const auto& [hash, id] : index_) {
    if (id < 0 || to_size(id) >= n) broken("the hash index points at block id " + std::to_string(id));
    const Block& b = blocks_[to_size(id)];
    if (b.registration == kUnregistered || b.group != 0 || b.hash != hash)
      broken("the hash index points at block " + std::to_string(id) + ", whose stored hash differs");
  }
}

}  // namespace orzo
