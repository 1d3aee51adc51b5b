#include "text/tokenizer/added_tokens.hpp"

#include <algorithm>

#include "text/tokenizer/unicode.hpp"

namespace orzo {
namespace {

bool is_word_char(char32_t cp) {
  // HF's single_word test: alphanumeric or '_'. Beyond ASCII, anything not whitespace
  // or ASCII punctuation counts as part of a word, which is what letters and digits do.
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  return !is_unicode_whitespace(cp);
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) {
  for (AddedToken& t : tokens)
    if (!t.content.empty()) tokens_.push_back(std::move(t));
  for (size_t k = 0; k < tokens_.size(); ++k) by_first_byte_[static_cast<unsigned char>(tokens_[k].content[0])].push_back(k);
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(),
                     [&](size_t a, size_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

bool AddedTokens::matches_at(const AddedToken& t, std::string_view text, size_t pos) const {
  if (text.compare(pos, t.content.size(), t.content) != 0) return false;
  if (!t.single_word) return true;
  const size_t end = pos + t.content.size();
  if (pos > 0 && is_word_char(previous_code_point(text, pos))) return false;
  if (end < text.size()) {
    size_t i = end;
    if (is_word_char(next_code_point(text, i))) return false;
  }
  return true;
}

void AddedTokens::split(std::string_view text, std::vector<Part>& parts) const {
  parts.clear();
  size_t text_begin = 0;  // start of the pending plain text
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (size_t k : candidates) {
      if (matches_at(tokens_[k], text, pos)) {
        hit = &tokens_[k];
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + hit->content.size();
    if (hit->lstrip) {
      while (begin > text_begin) {
        const char32_t cp = previous_code_point(text, begin);
        if (!is_unicode_whitespace(cp)) break;
        begin -= cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      }
    }
    if (hit->rstrip) {
      while (end < text.size()) {
        size_t i = end;
        if (!is_unicode_whitespace(next_code_point(text, i))) break;
        end = i;
      }
    }
    if (begin > text_begin) parts.push_back({text_begin, begin, -1});
    parts.push_back({begin, end, hit->id});
    text_begin = pos = end;
  }
  if (text_begin < text.size()) parts.push_back({text_begin, text.size(), -1});
}

}  // namespace orzo
