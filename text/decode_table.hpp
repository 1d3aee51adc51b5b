#pragma once
// What decoding needs to know of a vocabulary, whatever the tokenizer family: the bytes
// each token stands for once the family's decoder has run (byte-level characters mapped
// back to bytes, '▁' turned into a space, <0xNN> into its byte), which tokens are special,
// and whether the decoder strips the one space that SentencePiece normalizers prepend.
// The one-shot decode and the streaming detokenizer both read this table, which is what
// keeps them equal.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace orzo {

struct DecodeTable {
  std::vector<std::string> bytes;    // per token id
  std::vector<uint8_t> special;      // per token id: 1 for special tokens (skippable)
  bool strip_leading_space = false;  // drop one space at the very start of the text
};

// All ids at once: their bytes concatenated (special tokens left out when skip_special),
// one leading space dropped when the table says so, and every maximal invalid UTF-8
// subsequence replaced by U+FFFD. Ids outside the table are skipped.
std::string decode(const DecodeTable& table, const int32_t* ids, size_t n, bool skip_special);

}  // namespace orzo
