#include "grammar/vocabulary.hpp"

#include <algorithm>
#include <numeric>

namespace orzo::grammar {

Vocabulary::Vocabulary(const std::vector<std::string>& bytes, const std::vector<uint8_t>& special,
                       std::vector<int32_t> eos, int32_t size)
    : bytes_(bytes), special_(special), eos_(std::move(eos)), size_(size) {
  bytes_.resize(static_cast<size_t>(std::max<int32_t>(size_, static_cast<int32_t>(bytes_.size()))));
  special_.resize(bytes_.size(), 0);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < size_; ++id)
    if (constrainable(id)) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  // Breadth-first over the sorted spellings, so that each node's children sit side by side:
  // a node is a range of `ids` sharing its path, split by the byte at its depth.
  struct Pending {
    int32_t node;
    size_t begin, end, depth;
  };
  nodes_.push_back(Node{});
  std::vector<Pending> queue{{0, 0, ids.size(), 0}};
  for (size_t q = 0; q < queue.size(); ++q) {
    const Pending p = queue[q];
    size_t i = p.begin;
    const auto token_begin = static_cast<int32_t>(tokens_.size());
    while (i < p.end && bytes_[static_cast<size_t>(ids[i])].size() == p.depth) tokens_.push_back(ids[i++]);
    nodes_[static_cast<size_t>(p.node)].token_begin = token_begin;
    nodes_[static_cast<size_t>(p.node)].token_end = static_cast<int32_t>(tokens_.size());
    nodes_[static_cast<size_t>(p.node)].child_begin = static_cast<int32_t>(nodes_.size());
    while (i < p.end) {
      const auto byte = static_cast<uint8_t>(bytes_[static_cast<size_t>(ids[i])][p.depth]);
      size_t j = i;
      while (j < p.end && static_cast<uint8_t>(bytes_[static_cast<size_t>(ids[j])][p.depth]) == byte) ++j;
      Node child;
      child.byte = byte;
      nodes_.push_back(child);
      queue.push_back({static_cast<int32_t>(nodes_.size() - 1), i, j, p.depth + 1});
      i = j;
    }
    nodes_[static_cast<size_t>(p.node)].child_end = static_cast<int32_t>(nodes_.size());
  }
}

bool Vocabulary::constrainable(int32_t id) const {
  return id >= 0 && id < size_ && !special_[static_cast<size_t>(id)] && !bytes_[static_cast<size_t>(id)].empty();
}

}  // namespace orzo::grammar
