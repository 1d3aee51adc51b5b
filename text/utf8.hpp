#pragma once
// UTF-8 well-formedness for text leaving the model: token bytes arrive in pieces that may
// cut a character (byte-fallback tokens carry one byte each) or may not be UTF-8 at all.
// Utf8Repair is a byte-stream state machine, so feeding text in any number of pieces gives
// the same output as feeding it whole; that is what lets the streaming detokenizer and the
// one-shot decode agree. Ill-formed input follows the Unicode "maximal subpart" practice
// (Unicode 15, section 3.9, U+FFFD substitution), the one Python's
// bytes.decode('utf-8', 'replace') and the WHATWG encoding standard use: each maximal
// subpart of an ill-formed subsequence becomes one U+FFFD, where overlong forms
// (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and values above U+10FFFF
// (F4 90..BF, F5..FF) are ill-formed at the first byte that rules them out.

#include <cstdint>
#include <string>
#include <string_view>

namespace orzo {

// U+FFFD REPLACEMENT CHARACTER, in UTF-8.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

class Utf8Repair {
 public:
  // Appends `in` to `out` as well-formed UTF-8, continuing a character begun by earlier
  // calls. A character still incomplete at the end of `in` is held back (at most three
  // bytes) as long as later bytes could still complete it.
  void feed(std::string_view in, std::string& out);

  // Ends the stream: a held incomplete character becomes one U+FFFD.
  void finish(std::string& out);

 private:
  size_t continue_held(std::string_view in, std::string& out);

  char held_[4] = {};  // at most three held between calls; the fourth completes a character
  uint8_t held_len_ = 0;
};

// Whether `text` is well-formed UTF-8 as a whole (no truncated character at the end).
bool valid_utf8(std::string_view text);

}  // namespace orzo
