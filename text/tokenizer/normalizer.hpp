#pragma once
// The normalizers HF tokenizer.json files use, as a list of steps run in order on each
// stretch of text between added tokens: Unicode normal forms (through ICU), Lowercase,
// Strip, and SentencePiece's Prepend('▁') + Replace(' ', '▁').
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace orzo {

class SplitRegex;

class Normalizer {
 public:
  enum class Form { NFC, NFD, NFKC, NFKD };

  void add_unicode_form(Form form);
  void add_prepend(std::string prefix);                      // to non-empty text only
  void add_replace(std::string pattern, std::string content);  // every occurrence
  // Every match of `pattern` (found as HF finds split matches) becomes `content`.
  void add_replace_regex(std::shared_ptr<const SplitRegex> pattern, std::string content);
  // Each character to its full lower case, one character at a time (Rust's
  // char::to_lowercase, as HF does it: no final-sigma rule).
  void add_lowercase();
  // Removes Unicode White_Space at the start and/or the end.
  void add_strip(bool left, bool right);

  bool empty() const { return steps_.empty(); }
  // True when the steps only apply Unicode normal forms, which leave ASCII alone.
  bool only_unicode_forms() const;

  // Normalizes `in` into `out` (replacing its contents).
  void apply(std::string_view in, std::string& out) const;

 private:
  struct Step {
    enum class Kind { Form, Prepend, Replace, ReplaceRegex, Lowercase, Strip } kind = Kind::Form;
    Form form = Form::NFC;
    std::string a, b;
    bool left = false, right = false;         // Strip
    std::shared_ptr<const SplitRegex> regex;  // ReplaceRegex
  };
  std::vector<Step> steps_;
};

}  // namespace orzo
