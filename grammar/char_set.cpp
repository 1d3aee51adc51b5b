#include "grammar/char_set.hpp"

#include <algorithm>

namespace orzo::grammar {

CharSet CharSet::range(uint32_t lo, uint32_t hi) {
  CharSet s;
  s.add(lo, hi);
  return s;
}

CharSet CharSet::all() {
  CharSet s;
  s.add(0, 0xD7FF);
  s.add(0xE000, kMaxCodePoint);
  return s;
}

void CharSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, std::min(hi, kMaxCodePoint));
  normalize();
}

void CharSet::add(const CharSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CharSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges_ = std::move(merged);
}

CharSet CharSet::complement() const { return all().minus(*this); }

CharSet CharSet::minus(const CharSet& other) const {
  CharSet out;
  for (auto [lo, hi] : ranges_) {
    uint32_t from = lo;
    for (const auto& [olo, ohi] : other.ranges_) {
      if (ohi < from || olo > hi) continue;
      if (olo > from) out.ranges_.emplace_back(from, olo - 1);
      if (ohi >= hi) {
        from = hi + 1;
        break;
      }
      from = ohi + 1;
    }
    if (from <= hi && from >= lo) out.ranges_.emplace_back(from, hi);
  }
  out.normalize();
  return out;
}

bool CharSet::contains(uint32_t c) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(c, UINT32_MAX));
  return it != ranges_.begin() && std::prev(it)->second >= c;
}

namespace {

using Sequence = std::vector<std::pair<uint8_t, uint8_t>>;

int encoded_length(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

uint32_t max_of_length(int n) { return n == 1 ? 0x7F : n == 2 ? 0x7FF : n == 3 ? 0xFFFF : kMaxCodePoint; }

void encode(uint32_t c, int n, uint8_t* out) {
  if (n == 1) {
    out[0] = static_cast<uint8_t>(c);
    return;
  }
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    c >>= 6;
  }
  out[0] = static_cast<uint8_t>((n == 2 ? 0xC0 : n == 3 ? 0xE0 : 0xF0) | c);
}

// [lo, hi] of one encoded length as byte-range sequences: split until each piece is a
// product of byte ranges (the low bytes run over their whole 0x80..0xBF span, or the leading
// bytes agree).
void split(uint32_t lo, uint32_t hi, int n, std::vector<Sequence>& out) {
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, n, out);
        split((lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, n, out);
        split(hi & ~m, hi, n, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, n, a);
  encode(hi, n, b);
  Sequence seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<Sequence> utf8_sequences(const CharSet& set) {
  std::vector<Sequence> out;
  const CharSet encodable = set.minus(CharSet::range(0xD800, 0xDFFF));
  for (auto [lo, hi] : encodable.ranges()) {
    for (int n = encoded_length(lo); n <= 4 && lo <= hi; ++n) {
      const uint32_t top = std::min(hi, max_of_length(n));
      if (lo <= top) split(lo, top, n, out);
      lo = top + 1;
    }
  }
  return out;
}

}  // namespace orzo::grammar
