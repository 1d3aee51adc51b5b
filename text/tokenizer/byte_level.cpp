#include "text/tokenizer/byte_level.hpp"

#include <array>
#include <cstdint>

#include "text/tokenizer/unicode.hpp"

namespace orzo {
namespace {

// Bytes that are printable Latin-1 stand for themselves; the rest take code points from
// U+0100 upwards in byte order.
struct ByteLevelMaps {
  std::array<std::string, 256> to_char;
  std::array<int16_t, 324> to_byte{};  // indexed by code point; -1 when not a stand-in

  ByteLevelMaps() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      append_utf8(cp, to_char[static_cast<size_t>(b)]);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelMaps& maps() {
  static const ByteLevelMaps m;
  return m;
}

}  // namespace

void append_byte_level(std::string_view bytes, std::string& out) {
  const auto& m = maps();
  for (char c : bytes) out += m.to_char[static_cast<unsigned char>(c)];
}

std::optional<std::string> bytes_of_byte_level(std::string_view token) {
  const auto& m = maps();
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    const char32_t cp = next_code_point(token, i);
    if (cp >= m.to_byte.size() || m.to_byte[cp] < 0) return std::nullopt;
    out += static_cast<char>(m.to_byte[cp]);
  }
  return out;
}

}  // namespace orzo
