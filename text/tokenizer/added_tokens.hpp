#pragma once
// Added tokens (special ones like <|im_end|> and <s>, and user-added words) are found in
// the raw text before normalization and BPE, as HF `tokenizers` does: leftmost match
// first, the longest token among those starting there, with the lstrip/rstrip/single_word
// options. The text between matches goes through the normal pipeline.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace orzo {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only where it is not inside a word
  bool normalized = false;   // matched after normalization (supported where that is the raw text)
};

class AddedTokens {
 public:
  AddedTokens() = default;
  explicit AddedTokens(std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }

  // A stretch of the input: an added token (id >= 0) or plain text (id < 0).
  struct Part {
    size_t begin, end;
    int32_t id;
  };
  // Cuts `text` (valid UTF-8) into parts; `parts` is replaced.
  void split(std::string_view text, std::vector<Part>& parts) const;

 private:
  bool matches_at(const AddedToken& t, std::string_view text, size_t pos) const;
  std::vector<AddedToken> tokens_;  // non-empty contents only: an empty one would match everywhere
  std::vector<std::vector<size_t>> by_first_byte_ = std::vector<std::vector<size_t>>(256);  // longest first
};

}  // namespace orzo
