#pragma once
// Token ids to text, one token at a time, for streaming responses. Each push returns the
// text the new token adds, always whole UTF-8 characters: bytes of a character that later
// tokens may complete (byte-fallback tokens carry one byte each) wait inside, at most three.
// The deltas of a stream, followed by finish(), add up to decode() of the same ids
// (decode runs this class to the end), so streamed and non-streamed responses agree.
// No allocation per token once the internal buffer has grown to the longest delta.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/decode_table.hpp"
#include "text/utf8.hpp"

namespace orzo {

class Detokenizer {
 public:
  // `table` must outlive the detokenizer.
  explicit Detokenizer(const DecodeTable& table, bool skip_special = true);

  // The text that token `id` adds (possibly empty), valid until the next call. Special
  // tokens add nothing when skipped; ids outside the table add nothing.
  // Throws std::logic_error after finish().
  std::string_view push(int32_t id);

  // Ends the text: held bytes of an unfinished character become U+FFFD.
  std::string_view finish();

  // The text to come continues `context` (a completion continues its prompt): decoders that
  // strip the space a text begins with (SentencePiece's) strip it only where the context has
  // produced no text yet, so "The little dog" + " was" stays apart. Prompt text + the deltas
  // then equal decode(context + tokens), but where a character begins in the context's last
  // bytes: the first delta completes it whole. Call it before the first push.
  // Throws std::logic_error after a push.
  void continue_after(const std::vector<int32_t>& context);

 private:
  std::string_view text_of(int32_t id) const;  // the bytes `id` adds, "" when it adds none

  const DecodeTable* table_;
  bool skip_special_;
  bool at_start_ = true;  // no byte of text yet, so the leading-space strip is pending
  bool pushed_ = false;
  bool finished_ = false;
  Utf8Repair utf8_;
  std::string delta_;
};

}  // namespace orzo
