// libFuzzer entry point for text output: arbitrary token bytes through the Detokenizer
// and then the StopMatcher. The input's first byte holds the flags; then each token is a
// header byte (low 3 bits: length; bit 3: special; bit 4: also a stop string) and its
// bytes. Checked: every delta is well-formed and the deltas add up to the same bytes
// repaired in one piece; the stop matcher emits a prefix of the text that ends right
// before (or with include_stop, after) the first completed stop string and contains no
// earlier one, or the whole text when none occurs; ill-formed stop strings are refused.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "text/decode_table.hpp"
#include "text/detokenizer.hpp"
#include "text/stop_matcher.hpp"
#include "text/utf8.hpp"

namespace {

bool contains_any(const std::string& text, const std::vector<std::string>& stops) {
  for (const auto& s : stops)
    if (text.find(s) != std::string::npos) return true;
  return false;
}

// The end of the character that starts at `i` of well-formed `text`.
size_t next_character(const std::string& text, size_t i) {
  do ++i;
  while (i < text.size() && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80);
  return i;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool skip_special = data[0] & 1, include_stop = data[0] & 2;
  orzo::DecodeTable table;
  table.strip_leading_space = data[0] & 4;
  std::vector<std::string> stops;
  for (size_t i = 1; i < size;) {
    const uint8_t header = data[i++];
    const size_t len = std::min<size_t>(header & 7, size - i);
    std::string piece(reinterpret_cast<const char*>(data + i), len);
    i += len;
    if (header & 16) stops.push_back(piece);
    table.bytes.push_back(std::move(piece));
    table.special.push_back(header & 8 ? 1 : 0);
  }
  std::vector<int32_t> ids(table.bytes.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);

  orzo::Detokenizer detokenizer(table, skip_special);
  std::string text;
  for (const int32_t id : ids) {
    const std::string_view delta = detokenizer.push(id);
    if (!orzo::valid_utf8(delta)) __builtin_trap();
    text += delta;
  }
  text += detokenizer.finish();

  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i)
    if (!(skip_special && table.special[i])) bytes += table.bytes[i];
  if (table.strip_leading_space && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
  orzo::Utf8Repair whole;
  std::string repaired;
  whole.feed(bytes, repaired);
  whole.finish(repaired);
  if (text != repaired || !orzo::valid_utf8(text)) __builtin_trap();

  bool well_formed = true;
  for (const auto& s : stops) well_formed = well_formed && !s.empty() && orzo::valid_utf8(s);
  std::unique_ptr<orzo::StopMatcher> matcher;
  try {
    matcher = std::make_unique<orzo::StopMatcher>(stops, include_stop);
  } catch (const std::invalid_argument&) {
    if (well_formed) __builtin_trap();
    return 0;
  }
  if (!well_formed) __builtin_trap();

  // Text in deltas of one to four characters.
  std::string out;
  bool stopped = false;
  for (size_t i = 0; i < text.size() && !stopped;) {
    size_t j = i;
    for (size_t chars = 0; chars <= i % 4 && j < text.size(); ++chars) j = next_character(text, j);
    const orzo::StopMatcher::Result r = matcher->push(std::string_view(text).substr(i, j - i));
    out += r.text;
    stopped = r.stopped;
    i = j;
  }
  out += matcher->finish();
  if (text.compare(0, out.size(), out) != 0) __builtin_trap();
  if (!stopped) {
    if (out != text || contains_any(text, stops)) __builtin_trap();
    return 0;
  }
  const std::string& stop = stops[static_cast<size_t>(matcher->matched())];
  const size_t end = include_stop ? out.size() : out.size() + stop.size();
  if (text.compare(end - stop.size(), stop.size(), stop) != 0) __builtin_trap();
  if (contains_any(text.substr(0, end - 1), stops)) __builtin_trap();  // none completed earlier
  for (const auto& s : stops)  // nor a longer one at the same end
    if (s.size() > stop.size() && s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0)
      __builtin_trap();
  return 0;
}
