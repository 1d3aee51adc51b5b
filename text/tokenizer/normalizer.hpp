#pragma once
// The normalizers HF tokenizer.json files use for the supported families, as a list of
// steps run in order on each stretch of text between added tokens: Unicode normal forms
// (Qwen's NFC, through ICU) and SentencePiece's Prepend('▁') + Replace(' ', '▁').
#include <string>
#include <string_view>
#include <vector>

namespace orzo {

class Normalizer {
 public:
  enum class Form { NFC, NFD, NFKC, NFKD };

  void add_unicode_form(Form form);
  void add_prepend(std::string prefix);                      // to non-empty text only
  void add_replace(std::string pattern, std::string content);  // every occurrence

  bool empty() const { return steps_.empty(); }
  // True when the steps only apply Unicode normal forms, which leave ASCII alone.
  bool only_unicode_forms() const;

  // Normalizes `in` into `out` (replacing its contents).
  void apply(std::string_view in, std::string& out) const;

 private:
  struct Step {
    enum class Kind { Form, Prepend, Replace } kind;
    Form form;
    std::string a, b;
  };
  std::vector<Step> steps_;
};

}  // namespace orzo
