#pragma once
// Slow, obviously-right references for the text tests, written without the runtime's
// tables: UTF-8 repair by decoding each candidate character arithmetically and checking it
// re-encodes to the same bytes, maximal subparts from the set of all proper prefixes of all
// encoded scalar values; decoding as "concatenate, strip, repair"; and random decode
// tables mixing every kind of piece a vocabulary has.
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "text/decode_table.hpp"

namespace orzo::testing {

inline const std::string kFffd = "\xEF\xBF\xBD";

inline std::string encode_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

inline bool is_scalar_value(uint32_t cp) { return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }

// Whether `s` is exactly one well-formed character.
inline bool is_one_character(std::string_view s) {
  if (s.empty()) return false;
  const auto lead = static_cast<uint8_t>(s[0]);
  size_t length;
  uint32_t cp;
  if (lead < 0x80) {
    length = 1, cp = lead;
  } else if ((lead >> 5) == 0x6) {
    length = 2, cp = lead & 0x1Fu;
  } else if ((lead >> 4) == 0xE) {
    length = 3, cp = lead & 0x0Fu;
  } else if ((lead >> 3) == 0x1E) {
    length = 4, cp = lead & 0x07u;
  } else {
    return false;
  }
  if (s.size() != length) return false;
  for (size_t i = 1; i < length; ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if ((b >> 6) != 0x2) return false;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return is_scalar_value(cp) && encode_utf8(cp) == s;  // re-encoding catches overlongs
}

// Every proper prefix of the encoding of every scalar value.
inline const std::unordered_set<std::string>& proper_prefixes() {
  static const std::unordered_set<std::string> set = [] {
    std::unordered_set<std::string> s;
    for (uint32_t cp = 0x80; cp <= 0x10FFFF; ++cp) {
      if (!is_scalar_value(cp)) continue;
      const std::string e = encode_utf8(cp);
      for (size_t k = 1; k < e.size(); ++k) s.insert(e.substr(0, k));
    }
    return s;
  }();
  return set;
}

struct Repaired {
  std::string text;
  size_t open_tail = 0;  // bytes at the end that more bytes could still make a character
};

// U+FFFD for each maximal subpart: the longest run that is a proper prefix of some
// character, or one byte.
inline Repaired reference_repair(std::string_view b) {
  Repaired r;
  size_t i = 0;
  while (i < b.size()) {
    size_t whole = 0;
    for (size_t len = 1; len <= 4 && i + len <= b.size() && !whole; ++len)
      if (is_one_character(b.substr(i, len))) whole = len;
    if (whole) {
      r.text += b.substr(i, whole);
      i += whole;
      continue;
    }
    size_t part = 1;
    for (size_t len = 3; len >= 1; --len)
      if (i + len <= b.size() && proper_prefixes().count(std::string(b.substr(i, len)))) {
        part = len;
        break;
      }
    r.text += kFffd;
    r.open_tail = i + part == b.size() && proper_prefixes().count(std::string(b.substr(i, part))) ? part : 0;
    i += part;
  }
  return r;
}

inline bool reference_valid(std::string_view s) {
  const Repaired r = reference_repair(s);
  return r.text == s && r.open_tail == 0;
}

// The bytes of `ids` as decode() defines them, before repair.
inline std::string reference_bytes(const DecodeTable& t, const std::vector<int32_t>& ids, bool skip_special) {
  std::string s;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= t.bytes.size()) continue;
    if (skip_special && t.special[static_cast<size_t>(id)]) continue;
    s += t.bytes[static_cast<size_t>(id)];
  }
  if (t.strip_leading_space && !s.empty() && s[0] == ' ') s.erase(0, 1);
  return s;
}

// A random scalar value, about equally often of each encoded length.
inline uint32_t random_scalar(std::mt19937& rng) {
  static constexpr uint32_t lo[] = {0x20, 0x80, 0x800, 0x10000}, hi[] = {0x7E, 0x7FF, 0xFFFF, 0x10FFFF};
  const size_t k = std::uniform_int_distribution<size_t>(0, 3)(rng);
  while (true) {
    const uint32_t cp = std::uniform_int_distribution<uint32_t>(lo[k], hi[k])(rng);
    if (is_scalar_value(cp)) return cp;
  }
}

// A vocabulary of every kind of piece: the 256 byte-fallback bytes (ids 0..255, so id b
// is byte b), ASCII words with and without a leading space, whole multi-byte characters,
// characters cut into pieces, pieces mixing both, empty pieces and special tokens.
inline DecodeTable random_table(std::mt19937& rng, size_t extra_pieces) {
  DecodeTable t;
  for (int b = 0; b < 256; ++b) t.bytes.emplace_back(1, static_cast<char>(b));
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto word = [&] {
    std::string w;
    for (size_t n = 1 + pick(5); n > 0; --n) w += static_cast<char>('a' + pick(26));
    return w;
  };
  for (size_t i = 0; i < extra_pieces; ++i) {
    std::string piece;
    switch (pick(8)) {
      case 0: piece = word(); break;
      case 1: piece = " " + word(); break;
      case 2: piece = " "; break;
      case 3:
        for (size_t n = 1 + pick(3); n > 0; --n) piece += encode_utf8(random_scalar(rng));
        break;
      case 4: {  // one end of a character cut in two
        const std::string c = encode_utf8(random_scalar(rng) | 0x800);
        const size_t cut = 1 + pick(c.size() - 1);
        piece = pick(2) ? c.substr(0, cut) : c.substr(cut);
        break;
      }
      case 5: {  // text ending in the start of a character
        const std::string c = encode_utf8(0x10000 + static_cast<uint32_t>(pick(0x100000)));
        piece = (pick(2) ? " " : "") + word() + c.substr(0, 1 + pick(3));
        break;
      }
      case 6: break;  // empty
      case 7: piece = pick(2) ? "<|special|>" : " <s>"; break;
    }
    t.bytes.push_back(piece);
  }
  t.special.assign(t.bytes.size(), 0);
  for (size_t i = 256; i < t.bytes.size(); ++i)
    if (t.bytes[i] == "<|special|>" || t.bytes[i] == " <s>" || (t.bytes[i].empty() && pick(2))) t.special[i] = 1;
  t.strip_leading_space = pick(2) == 1;
  return t;
}

// Ids for `table` from random_table: mostly random pieces, sometimes the byte-fallback ids
// spelling a whole character, and now and then ids outside the table.
inline std::vector<int32_t> random_ids(std::mt19937& rng, const DecodeTable& table, size_t n) {
  std::vector<int32_t> ids;
  const auto size = static_cast<int32_t>(table.bytes.size());
  while (ids.size() < n) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind < 6) {
      ids.push_back(std::uniform_int_distribution<int32_t>(0, size - 1)(rng));
    } else if (kind < 9) {
      for (const char c : encode_utf8(random_scalar(rng))) ids.push_back(static_cast<uint8_t>(c));
    } else {
      ids.push_back(std::uniform_int_distribution<int>(0, 1)(rng) ? -1 : size);
    }
  }
  return ids;
}

}  // namespace orzo::testing
