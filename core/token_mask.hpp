#pragma once
// A set of token ids as bits, one per id of the vocabulary: the tokens an output constraint
// allows next (grammar/constraint.hpp makes them, the samplers apply them).
#include <cstdint>
#include <vector>

namespace orzo {

struct TokenMask {
  std::vector<uint64_t> words;  // id i is allowed when bit i % 64 of word i / 64 is set
  int32_t allowed = 0;          // how many ids are
  bool allows(int32_t id) const { return (words[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; }
};

}  // namespace orzo
