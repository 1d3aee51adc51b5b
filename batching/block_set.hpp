#pragma once
// A set of a pool's block ids, kept in order, so that the block manager can find the lowest
// id above a sequence's last block among its free blocks, or among the cached blocks it may
// evict: a bit per id, and a summary bit per word of ids telling whether that word has any.
// Finding the next id reads one word, then summary words (one per 4,096 ids) up to the
// first non-empty one; a pool of 16 M blocks has 4,096 of them, a pool of the usual tens of
// thousands, a handful. 1/8 byte per block, where an ordered tree would take a node (tens of
// bytes) per member.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace orzo {

class BlockSet {
 public:
  // Of ids [0, n): all of them, or none. n >= 0.
  BlockSet(int32_t n, bool all);

  int32_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool contains(int32_t id) const { return (bits_[word(id)] >> bit(id)) & 1; }
  // Each only for an id in [0, n) that is not in the set (insert) or is (erase).
  void insert(int32_t id);
  void erase(int32_t id);
  // The lowest id >= from in the set, or -1 when there is none (from >= 0, any size).
  int32_t lowest_from(int32_t from) const;
  // The lowest id above `after` (-1: any), else the lowest id, else -1: where a block table
  // whose last block is `after` grows, rising while it can.
  int32_t lowest_above(int32_t after) const {
    const int32_t id = lowest_from(after + 1);
    return id >= 0 ? id : lowest_from(0);
  }

  // Calls f(id) for each id in the set, in order.
  template <typename F>
  void for_each(F f) const {
    for (int32_t id = lowest_from(0); id >= 0; id = lowest_from(id + 1)) f(id);
  }

 private:
  static size_t word(int32_t id) { return static_cast<size_t>(id) >> 6; }
  static int bit(int32_t id) { return id & 63; }
  // The first set bit at or after bit `from` in `words`, or -1.
  static int64_t first_set(const std::vector<uint64_t>& words, int64_t from);

  int32_t n_, count_;
  std::vector<uint64_t> bits_;     // bit id: id is in the set
  std::vector<uint64_t> summary_;  // bit w: bits_[w] != 0
};

}  // namespace orzo
