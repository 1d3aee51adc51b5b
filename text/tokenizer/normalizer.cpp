#include "text/tokenizer/normalizer.hpp"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <stdexcept>

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

}  // namespace

void Normalizer::add_unicode_form(Form form) {
  icu_normalizer(form);  // fail at load time, not on the first text
  steps_.push_back({Step::Kind::Form, form, {}, {}});
}

void Normalizer::add_prepend(std::string prefix) {
  steps_.push_back({Step::Kind::Prepend, Form::NFC, std::move(prefix), {}});
}

void Normalizer::add_replace(std::string pattern, std::string content) {
  steps_.push_back({Step::Kind::Replace, Form::NFC, std::move(pattern), std::move(content)});
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
    }
  }
}

}  // namespace orzo
