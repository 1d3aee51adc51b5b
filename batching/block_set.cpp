#include "batching/block_set.hpp"

#include <stdexcept>
#include <string>

namespace orzo {

BlockSet::BlockSet(int32_t n, bool all) : n_(n), count_(all ? n : 0) {
  if (n < 0) throw std::invalid_argument("BlockSet: negative size " + std::to_string(n));
  const size_t words = (static_cast<size_t>(n) + 63) / 64;
  bits_.assign(words, all ? ~uint64_t{0} : 0);
  summary_.assign((words + 63) / 64, all ? ~uint64_t{0} : 0);
  if (!all) return;
  if (n % 64 != 0) bits_.back() = (uint64_t{1} << (n % 64)) - 1;
  if (words % 64 != 0) summary_.back() = (uint64_t{1} << (words % 64)) - 1;
}

void BlockSet::insert(int32_t id) {
  uint64_t& w = bits_[word(id)];
  w |= uint64_t{1} << bit(id);
  summary_[word(id) >> 6] |= uint64_t{1} << (word(id) & 63);
  ++count_;
}

void BlockSet::erase(int32_t id) {
  uint64_t& w = bits_[word(id)];
  w &= ~(uint64_t{1} << bit(id));
  if (w == 0) summary_[word(id) >> 6] &= ~(uint64_t{1} << (word(id) & 63));
  --count_;
}

int64_t BlockSet::first_set(const std::vector<uint64_t>& words, int64_t from) {
  auto w = static_cast<size_t>(from >> 6);
  if (w >= words.size()) return -1;
  uint64_t x = words[w] & (~uint64_t{0} << (from & 63));
  while (x == 0) {
    if (++w == words.size()) return -1;
    x = words[w];
  }
  return static_cast<int64_t>(w) * 64 + __builtin_ctzll(x);
}

int32_t BlockSet::lowest_from(int32_t from) const {
  if (from >= n_) return -1;
  // Within from's own word first; past it, the summary names the next word with a free id.
  const uint64_t here = bits_[word(from)] & (~uint64_t{0} << bit(from));
  if (here != 0) return static_cast<int32_t>(word(from) * 64 + static_cast<size_t>(__builtin_ctzll(here)));
  const int64_t w = first_set(summary_, static_cast<int64_t>(word(from)) + 1);
  return w < 0 ? -1 : static_cast<int32_t>(w * 64 + __builtin_ctzll(bits_[static_cast<size_t>(w)]));
}

}  // namespace orzo
