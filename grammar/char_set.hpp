#pragma once
// A set of Unicode code points as sorted, disjoint, non-adjacent ranges: the character
// classes of regular expressions and JSON strings before they become bytes.
#include <cstdint>
#include <utility>
#include <vector>

namespace orzo::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

class CharSet {
 public:
  CharSet() = default;
  static CharSet single(uint32_t c) { return range(c, c); }
  static CharSet range(uint32_t lo, uint32_t hi);
  static CharSet all();  // every code point but the surrogates, which UTF-8 cannot carry

  void add(uint32_t lo, uint32_t hi);
  void add(const CharSet& other);
  CharSet complement() const;  // against all()
  CharSet minus(const CharSet& other) const;
  bool contains(uint32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // inclusive
};

// The set's code points as UTF-8: alternatives, each a sequence of byte ranges (inclusive),
// whose union is exactly the encodings of the set's members.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(const CharSet& set);

}  // namespace orzo::grammar
