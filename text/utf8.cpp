#include "text/utf8.hpp"

#include <array>
#include <cstring>

namespace orzo {
namespace {

// What a first byte allows (Unicode Table 3-7): the sequence length (0: never a first
// byte) and the range of the second byte; later bytes are always 80..BF. Narrowing the
// second byte is what rules out overlongs, surrogates and values past U+10FFFF.
struct Lead {
  uint8_t length = 0, lo = 0, hi = 0;
};

constexpr std::array<Lead, 256> make_leads() {
  std::array<Lead, 256> t{};
  for (int b = 0x00; b <= 0x7F; ++b) t[b] = {1, 0, 0};
  for (int b = 0xC2; b <= 0xDF; ++b) t[b] = {2, 0x80, 0xBF};
  t[0xE0] = {3, 0xA0, 0xBF};
  for (int b = 0xE1; b <= 0xEC; ++b) t[b] = {3, 0x80, 0xBF};
  t[0xED] = {3, 0x80, 0x9F};
  t[0xEE] = t[0xEF] = {3, 0x80, 0xBF};
  t[0xF0] = {4, 0x90, 0xBF};
  t[0xF1] = t[0xF2] = t[0xF3] = {4, 0x80, 0xBF};
  t[0xF4] = {4, 0x80, 0x8F};
  return t;
}

constexpr std::array<Lead, 256> kLeads = make_leads();

// Whether `byte` may stand at position `pos` (1..3) of a sequence that began with `lead`.
inline bool fits(const Lead& lead, size_t pos, uint8_t byte) {
  return pos == 1 ? byte >= lead.lo && byte <= lead.hi : (byte & 0xC0) == 0x80;
}

// Index of the first byte >= 0x80 in [p + i, p + n), or n. Eight bytes at a time:
// model output is mostly ASCII.
inline size_t skip_ascii(const char* p, size_t i, size_t n) {
  constexpr uint64_t kHighBits = 0x8080808080808080ULL;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    if (word & kHighBits) break;
  }
  while (i < n && static_cast<uint8_t>(p[i]) < 0x80) ++i;
  return i;
}

}  // namespace

// Completes (or gives up on) the held character; returns how many bytes of `in` it took.
size_t Utf8Repair::continue_held(std::string_view in, std::string& out) {
  const Lead& lead = kLeads[static_cast<uint8_t>(held_[0])];
  size_t used = 0;
  while (used < in.size()) {
    const auto byte = static_cast<uint8_t>(in[used]);
    if (!fits(lead, held_len_, byte)) {
      // The held bytes are a maximal subpart; `byte` starts afresh.
      out += kReplacementCharacter;
      held_len_ = 0;
      return used;
    }
    held_[held_len_++] = static_cast<char>(byte);
    ++used;
    if (held_len_ == lead.length) {
      out.append(held_, held_len_);
      held_len_ = 0;
      return used;
    }
  }
  return used;
}

void Utf8Repair::feed(std::string_view in, std::string& out) {
  const char* p = in.data();
  const size_t n = in.size();
  size_t i = held_len_ ? continue_held(in, out) : 0;
  if (held_len_) return;  // `in` ended inside the held character
  size_t run = i;         // start of well-formed bytes not yet appended
  while (true) {
    i = skip_ascii(p, i, n);
    if (i == n) break;
    const Lead& lead = kLeads[static_cast<uint8_t>(p[i])];
    if (lead.length == 0) {
      out.append(p + run, i - run);
      out += kReplacementCharacter;
      run = ++i;
      continue;
    }
    size_t len = 1;
    while (len < lead.length && i + len < n && fits(lead, len, static_cast<uint8_t>(p[i + len]))) ++len;
    if (len == lead.length) {
      i += len;
      continue;
    }
    out.append(p + run, i - run);
    if (i + len == n) {
      // Cut off by the end of `in`; later bytes may still complete it.
      std::memcpy(held_, p + i, len);
      held_len_ = static_cast<uint8_t>(len);
      return;
    }
    out += kReplacementCharacter;
    i += len;
    run = i;
  }
  out.append(p + run, n - run);
}

void Utf8Repair::finish(std::string& out) {
  if (held_len_) out += kReplacementCharacter;
  held_len_ = 0;
}

bool valid_utf8(std::string_view text) {
  const char* p = text.data();
  const size_t n = text.size();
  size_t i = 0;
  while (true) {
    i = skip_ascii(p, i, n);
    if (i == n) return true;
    const Lead& lead = kLeads[static_cast<uint8_t>(p[i])];
    if (lead.length == 0 || i + lead.length > n) return false;
    for (size_t k = 1; k < lead.length; ++k)
      if (!fits(lead, k, static_cast<uint8_t>(p[i + k]))) return false;
    i += lead.length;
  }
}

}  // namespace orzo
