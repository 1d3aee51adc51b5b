#include "text/tokenizer/normalizer.hpp"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <stdexcept>

#include "text/tokenizer/pretokenizer.hpp"
#include "text/tokenizer/unicode.hpp"

namespace orzo {
namespace {

const icu::Normalizer2& icu_normalizer(Normalizer::Form form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case Normalizer::Form::NFC: n = icu::Normalizer2::getNFCInstance(status); break;
    case Normalizer::Form::NFD: n = icu::Normalizer2::getNFDInstance(status); break;
    case Normalizer::Form::NFKC: n = icu::Normalizer2::getNFKCInstance(status); break;
    case Normalizer::Form::NFKD: n = icu::Normalizer2::getNFKDInstance(status); break;
  }
  if (U_FAILURE(status) || n == nullptr)
    throw std::runtime_error(std::string("ICU normalizer unavailable: ") + u_errorName(status));
  return *n;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

void normalize_form(Normalizer::Form form, std::string& text) {
  if (is_ascii(text)) return;  // every normal form leaves ASCII as it is
  const icu::Normalizer2& n = icu_normalizer(form);
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode status = U_ZERO_ERROR;
  if (n.isNormalized(u, status) && U_SUCCESS(status)) return;
  status = U_ZERO_ERROR;
  const icu::UnicodeString normalized = n.normalize(u, status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU normalization failed: ") + u_errorName(status));
  text.clear();
  normalized.toUTF8String(text);
}

void replace_all(std::string& text, const std::string& pattern, const std::string& content) {
  if (pattern.empty() || text.find(pattern) == std::string::npos) return;
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  size_t pos = 0;
  for (size_t hit; (hit = text.find(pattern, pos)) != std::string::npos; pos = hit + pattern.size()) {
    out.append(text, pos, hit - pos);
    out += content;
  }
  out.append(text, pos, std::string::npos);
  text.swap(out);
}

void replace_regex(std::string& text, const SplitRegex& regex, const std::string& content) {
  std::vector<std::pair<size_t, size_t>> matches;
  regex.find_all(text, matches);
  if (matches.empty()) return;
  std::string out;
  size_t pos = 0;
  for (const auto& [begin, end] : matches) {
    out.append(text, pos, begin - pos);
    out += content;
    pos = end;
  }
  out.append(text, pos, std::string::npos);
  text.swap(out);
}

void lowercase(std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[pos]);
    if (c < 0x80) {
      out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : static_cast<char>(c);
      ++pos;
      continue;
    }
    const size_t start = pos;
    const char32_t cp = next_code_point(text, pos);
    // One character in, with no neighbours, so ICU applies no context (final sigma) and
    // only the unconditional full mappings (İ -> i̇), as Rust's char::to_lowercase does.
    UChar in[2], lowered[8];
    int32_t n_in = 0;
    U16_APPEND_UNSAFE(in, n_in, static_cast<UChar32>(cp));
    UErrorCode status = U_ZERO_ERROR;
    const int32_t n = u_strToLower(lowered, 8, in, n_in, "", &status);
    if (U_FAILURE(status)) {
      out.append(text, start, pos - start);
      continue;
    }
    icu::UnicodeString(false, lowered, n).toUTF8String(out);
  }
  text.swap(out);
}

void strip(std::string& text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  for (size_t next = begin; left && begin < end && is_unicode_whitespace(next_code_point(text, next)); next = begin)
    begin = next;
  while (right && end > begin && is_unicode_whitespace(previous_code_point(text, end))) {
    --end;
    while ((static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  }
  text = text.substr(begin, end - begin);
}

}  // namespace

void Normalizer::add_unicode_form(Form form) {
  icu_normalizer(form);  // fail at load time, not on the first text
  Step s;
  s.form = form;
  steps_.push_back(std::move(s));
}

void Normalizer::add_prepend(std::string prefix) {
  Step s;
  s.kind = Step::Kind::Prepend;
  s.a = std::move(prefix);
  steps_.push_back(std::move(s));
}

void Normalizer::add_replace(std::string pattern, std::string content) {
  Step s;
  s.kind = Step::Kind::Replace;
  s.a = std::move(pattern);
  s.b = std::move(content);
  steps_.push_back(std::move(s));
}

void Normalizer::add_replace_regex(std::shared_ptr<const SplitRegex> pattern, std::string content) {
  Step s;
  s.kind = Step::Kind::ReplaceRegex;
  s.regex = std::move(pattern);
  s.b = std::move(content);
  steps_.push_back(std::move(s));
}

void Normalizer::add_lowercase() {
  Step s;
  s.kind = Step::Kind::Lowercase;
  steps_.push_back(std::move(s));
}

void Normalizer::add_strip(bool left, bool right) {
  Step s;
  s.kind = Step::Kind::Strip;
  s.left = left;
  s.right = right;
  steps_.push_back(std::move(s));
}

bool Normalizer::only_unicode_forms() const {
  for (const Step& s : steps_)
    if (s.kind != Step::Kind::Form) return false;
  return true;
}

void Normalizer::apply(std::string_view in, std::string& out) const {
  out.assign(in.data(), in.size());
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Step::Kind::Form: normalize_form(s.form, out); break;
      case Step::Kind::Prepend:
        if (!out.empty()) out.insert(0, s.a);
        break;
      case Step::Kind::Replace: replace_all(out, s.a, s.b); break;
      case Step::Kind::ReplaceRegex: replace_regex(out, *s.regex, s.b); break;
      case Step::Kind::Lowercase: lowercase(out); break;
      case Step::Kind::Strip: strip(out, s.left, s.right); break;
    }
  }
}

}  // namespace orzo
